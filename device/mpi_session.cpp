#include "mpi_session.h"

#include "eplb/base/launcher.h"

#include <cstdlib>

#ifdef EPLB_HAVE_MPI
#include <mpi.h>
#endif

namespace eplb::device::mpi {

bool Launched() {
  // PMIx gives only the rank before MPI starts; the rest as every command reads it.
  return DetectLaunch().kind == LaunchKind::kMpi || std::getenv("PMIX_RANK") != nullptr;
}

#ifdef EPLB_HAVE_MPI

namespace {
int g_rank = 0, g_size = 1, g_local_rank = 0;
bool g_initialized = false;

void FinalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}
}  // namespace

Status Init() {
  if (g_initialized) return Status::Ok();
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    return Status::Unavailable("MPI_Init_thread failed");
  }
  std::atexit(FinalizeAtExit);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &g_local_rank);
  MPI_Comm_free(&node);
  g_initialized = true;
  return Status::Ok();
}

bool Initialized() {
  return g_initialized;
}
int Rank() {
  return g_rank;
}
int Size() {
  return g_size;
}
int LocalRank() {
  return g_local_rank;
}

int AllMin(int value) {
  if (!g_initialized) return value;
  int out = value;
  MPI_Allreduce(&value, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return out;
}

void Barrier() {
  if (g_initialized) MPI_Barrier(MPI_COMM_WORLD);
}

void Broadcast(void* data, size_t bytes, int root) {
  if (g_initialized) MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD);
}

void AllMax(std::vector<int64_t>& values) {
  if (!g_initialized || g_size == 1 || values.empty()) return;
  MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_INT64_T, MPI_MAX,
                MPI_COMM_WORLD);
}

std::vector<TransferRecord> GatherTransfers(const std::vector<TransferRecord>& mine) {
  if (!g_initialized || g_size == 1) return mine;
  // As plain bytes: TransferRecord is trivially copyable and every process is this binary.
  const int bytes = static_cast<int>(mine.size() * sizeof(TransferRecord));
  std::vector<int> counts(static_cast<size_t>(g_size)), offsets(static_cast<size_t>(g_size));
  MPI_Gather(&bytes, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  int total = 0;
  for (int p = 0; p < g_size; ++p) {
    offsets[p] = total;
    total += counts[p];
  }
  std::vector<TransferRecord> all(g_rank == 0 ? static_cast<size_t>(total) / sizeof(TransferRecord)
                                              : 0);
  MPI_Gatherv(mine.data(), bytes, MPI_BYTE, all.data(), counts.data(), offsets.data(), MPI_BYTE, 0,
              MPI_COMM_WORLD);
  return g_rank == 0 ? all : mine;
}

#else  // built without MPI: one process

Status Init() {
  return Status::Unavailable(
      "this eplb was built without MPI (install libopenmpi-dev and rebuild for --mpi)");
}
bool Initialized() {
  return false;
}
int Rank() {
  return 0;
}
int Size() {
  return 1;
}
int LocalRank() {
  return 0;
}
int AllMin(int value) {
  return value;
}
void Barrier() {}
void Broadcast(void*, size_t, int) {}
void AllMax(std::vector<int64_t>&) {}
std::vector<TransferRecord> GatherTransfers(const std::vector<TransferRecord>& mine) {
  return mine;
}

#endif

}  // namespace eplb::device::mpi
