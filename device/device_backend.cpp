// The device backend (device_backend.h): its set-up (GPUs, memory, streams, NCCL communicators)
// and teardown, and the foreground's work on the weights: filling and checking them, and the
// emulated steps. The rearrangement contract's calls are in device_backend_rearrangement.cpp.
#include "device_backend.h"

#include "cuda_check.h"
#include "device_rank_state.h"
#include "eplb/migrate/weight_pattern.h"
#include "kernels.h"
#include "mpi_session.h"
#include "nccl_comm.h"
#include "nvtx.h"

namespace eplb::device {

const char* DeviceModeName(DeviceMode mode) {
  switch (mode) {
    case DeviceMode::kVirtual:
      return "virtual";
    case DeviceMode::kNccl:
      return "nccl";
    case DeviceMode::kMpi:
      return "mpi";
  }
  return "?";
}

bool HaveNccl() {
#ifdef EPLB_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

Result<int> CountDevices() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    return Status::Unavailable(fmt::format("no CUDA GPU: cudaGetDeviceCount failed: {} ({})",
                                           cudaGetErrorName(e), cudaGetErrorString(e)));
  }
  if (count == 0) return Status::Unavailable("no CUDA GPU: cudaGetDeviceCount found 0 devices");
  return count;
}

std::string DescribeDevice(int device) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) return fmt::format("GPU {}", device);
  return fmt::format("{} (sm_{}{}, {:.1f} GiB)", p.name, p.major, p.minor,
                     static_cast<double>(p.totalGlobalMem) / (1ULL << 30));
}

Result<size_t> FreeMemory(int device) {
  EPLB_CUDA(cudaSetDevice(device), "");
  size_t free = 0, total = 0;
  EPLB_CUDA(cudaMemGetInfo(&free, &total), fmt::format("GPU {}: ", device));
  return free;
}

DeviceBackend::DeviceBackend(const Topology& topology, const DeviceConfig& config)
    : topology_(topology),
      config_(config),
      slots_(topology.num_slots()),
      expert_bytes_(static_cast<size_t>(topology.expert_bytes())),
      live_(static_cast<size_t>(config.num_layers) * slots_, nullptr),
      staging_(static_cast<size_t>(config.staging_buffers) * slots_, nullptr),
      lost_(topology.num_ranks()),
      epoch_(std::chrono::steady_clock::now()) {}

Result<std::unique_ptr<DeviceBackend>> DeviceBackend::Create(const Topology& topology,
                                                             const DeviceConfig& config) {
  auto backend = CreateLocal(topology, config);
  // Under MPI every process reaches the collectives that follow (the communicator's set-up, the
  // barrier) or none does: a process that failed here tells the others, instead of leaving them
  // waiting for it.
  if (config.mode == DeviceMode::kMpi && mpi::Initialized() &&
      mpi::AllMin(backend.ok() ? 1 : 0) == 0) {
    return backend.ok() ? Status::Unavailable(
                              "another process failed to set up its GPU (its error is in its own "
                              "log)")
                        : backend.status();
  }
  if (!backend.ok()) return backend.status();
  EPLB_RETURN_IF_ERROR((*backend)->Connect());
  return backend;
}

Result<std::unique_ptr<DeviceBackend>> DeviceBackend::CreateLocal(const Topology& topology,
                                                                  const DeviceConfig& config) {
  if (topology.expert_bytes() <= 0 || topology.expert_bytes() % 8 != 0) {
    return Status::InvalidArgument(
        fmt::format("expert bytes is {}; the device backend needs a positive multiple of 8",
                    topology.expert_bytes()));
  }
  if (config.num_layers < 1 || config.staging_buffers < 1) {
    return Status::InvalidArgument(
        fmt::format("layers {} and staging buffers {}: both must be at least 1", config.num_layers,
                    config.staging_buffers));
  }
  auto devices = CountDevices();
  if (!devices.ok()) return devices.status();
  const int ranks = topology.num_ranks();
  if (config.mode == DeviceMode::kNccl) {
    if (!HaveNccl()) {
      return Status::InvalidArgument(
          "this eplb was built without NCCL (nccl.h not found): use virtual ranks");
    }
    if (config.first_device + ranks > *devices) {
      return Status::InvalidArgument(fmt::format(
          "NCCL mode runs one rank per GPU: {} ranks from GPU {} need {} GPUs, this machine has "
          "{}; use virtual ranks (--virtual) or fewer ranks",
          ranks, config.first_device, config.first_device + ranks, *devices));
    }
  } else if (config.mode == DeviceMode::kMpi) {
    if (!HaveNccl() || !mpi::Initialized()) {
      return Status::InvalidArgument(
          "MPI mode needs NCCL and MPI, started (eplb device-run --mpi under mpirun)");
    }
    if (mpi::Size() != ranks) {
      return Status::InvalidArgument(fmt::format(
          "MPI mode runs one rank per process: the scenario has {} ranks, mpirun started {} "
          "processes (mpirun -np {})",
          ranks, mpi::Size(), ranks));
    }
    if (config.first_device + mpi::LocalRank() >= *devices) {
      return Status::InvalidArgument(fmt::format(
          "process {} is number {} on its node but the node has {} GPUs from GPU {}", mpi::Rank(),
          mpi::LocalRank(), *devices - config.first_device, config.first_device));
    }
  } else if (config.first_device >= *devices) {
    return Status::InvalidArgument(fmt::format("GPU {} does not exist: this machine has {} GPUs",
                                               config.first_device, *devices));
  }
  // Waiting host threads block instead of spinning; only possible before the context exists.
  const int first = config.first_device + (config.mode == DeviceMode::kMpi ? mpi::LocalRank() : 0);
  const int used = config.mode == DeviceMode::kNccl ? ranks : 1;
  for (int d = first; d < first + used; ++d) {
    EPLB_CUDA(cudaSetDevice(d), fmt::format("GPU {}: ", d));
    const cudaError_t flags = cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync);
    // Already active (an earlier backend in this process): its flags stay, as set then.
    if (flags != cudaSuccess && flags != cudaErrorSetOnActiveProcess) {
      EPLB_CUDA(flags, fmt::format("GPU {}: ", d));
    }
    (void)cudaGetLastError();  // clear a sticky cudaErrorSetOnActiveProcess
  }
  // Memory: every rank's weights and staging buffers, against the free memory of each GPU.
  const size_t per_rank = static_cast<size_t>(config.num_layers + config.staging_buffers) *
                          topology.slots_per_gpu() * static_cast<size_t>(topology.expert_bytes());
  const size_t ranks_per_gpu = config.mode == DeviceMode::kVirtual ? ranks : 1;
  const int gpu = config.first_device + (config.mode == DeviceMode::kMpi ? mpi::LocalRank() : 0);
  auto free = FreeMemory(gpu);
  if (!free.ok()) return free.status();
  if (per_rank * ranks_per_gpu > *free) {
    return Status::InvalidArgument(fmt::format(
        "{} rank(s) per GPU × ({} layers + {} staging) × {} slots × {} bytes per expert need "
        "{:.2f} GiB; GPU {} has {:.2f} GiB free: lower the expert bytes",
        ranks_per_gpu, config.num_layers, config.staging_buffers, topology.slots_per_gpu(),
        topology.expert_bytes(), static_cast<double>(per_rank * ranks_per_gpu) / (1ULL << 30), gpu,
        static_cast<double>(*free) / (1ULL << 30)));
  }
  std::unique_ptr<DeviceBackend> backend(new DeviceBackend(topology, config));
  EPLB_RETURN_IF_ERROR(backend->Init());
  return backend;
}

Status DeviceBackend::Init() {
  const int ranks = topology_.num_ranks();
  const int per_gpu = topology_.slots_per_gpu();
  const int buffers = config_.staging_buffers;
  ranks_.resize(static_cast<size_t>(ranks));  // null for the ranks of other processes
  for (int r = 0; r < ranks; ++r) {
    if (IsLocal(r)) local_ranks_.push_back(r);
  }
  for (int r : local_ranks_) {
    ranks_[r] = std::make_unique<RankState>();
    RankState& s = *ranks_[r];
    switch (config_.mode) {
      case DeviceMode::kVirtual:
        s.device = config_.first_device;
        break;
      case DeviceMode::kNccl:
        s.device = config_.first_device + r;
        break;
      case DeviceMode::kMpi:
        s.device = config_.first_device + mpi::LocalRank();
        break;
    }
    const std::string at = At(r);
    EPLB_CUDA(cudaSetDevice(s.device), at);
    EPLB_CUDA(cudaStreamCreateWithFlags(&s.main, cudaStreamNonBlocking), at);
    EPLB_CUDA(cudaStreamCreateWithFlags(&s.local, cudaStreamNonBlocking), at);
    for (auto& lane : s.lane)
      EPLB_CUDA(cudaStreamCreateWithFlags(&lane, cudaStreamNonBlocking), at);
    s.staged.assign(buffers, nullptr);
    s.consumed.assign(buffers, nullptr);
    for (int b = 0; b < buffers; ++b) {
      EPLB_CUDA(cudaEventCreateWithFlags(&s.staged[b], cudaEventDisableTiming), at);
      EPLB_CUDA(cudaEventCreateWithFlags(&s.consumed[b], cudaEventDisableTiming), at);
    }
    EPLB_CUDA(cudaEventCreate(&s.anchor), at);
    for (int lane = 0; lane < kNumLinkClasses; ++lane) {
      EPLB_CUDA(cudaEventCreate(&s.round_begin[lane]), at);
      EPLB_CUDA(cudaEventCreate(&s.round_end[lane]), at);
    }
    const size_t slot_buffers = static_cast<size_t>(config_.num_layers + buffers) * per_gpu;
    EPLB_CUDA(cudaMalloc(&s.pool, slot_buffers * expert_bytes_), at);
    auto* next = static_cast<uint8_t*>(s.pool);
    const auto take = [&] {
      auto* p = reinterpret_cast<uint64_t*>(next);
      next += expert_bytes_;
      return p;
    };
    for (int layer = 0; layer < config_.num_layers; ++layer) {
      for (int i = 0; i < per_gpu; ++i) live(layer, r * per_gpu + i) = take();
    }
    for (int b = 0; b < buffers; ++b) {
      for (int i = 0; i < per_gpu; ++i) staged(b, r * per_gpu + i) = take();
    }
    const size_t list = static_cast<size_t>(config_.num_layers) * per_gpu * sizeof(SlotRef);
    EPLB_CUDA(cudaMalloc(&s.check_slots, list), at);
    EPLB_CUDA(cudaMalloc(&s.step_slots, list), at);
    EPLB_CUDA(cudaMalloc(&s.mismatch, sizeof(*s.mismatch)), at);
    EPLB_CUDA(cudaMalloc(&s.sink, sizeof(*s.sink)), at);
    EPLB_CUDA(cudaMalloc(&s.step_scratch, sizeof(*s.step_scratch)), at);
    EPLB_CUDA(cudaMemset(s.sink, 0, sizeof(*s.sink)), at);
  }
  return Status::Ok();
}

Status DeviceBackend::Connect() {
  EPLB_RETURN_IF_ERROR(CreateComms());
  if (config_.mode == DeviceMode::kMpi) {
    // One time origin for every process, as near as a barrier allows.
    mpi::Barrier();
    epoch_ = std::chrono::steady_clock::now();
  }
  return Status::Ok();
}

Status DeviceBackend::CreateComms() {
#ifdef EPLB_HAVE_NCCL
  if (config_.mode == DeviceMode::kNccl) {
    std::vector<int> devices;
    std::vector<ncclComm_t> comms(ranks_.size(), nullptr);
    for (const auto& s : ranks_) devices.push_back(s->device);
    EPLB_RETURN_IF_ERROR(CreateLocalComms(devices, comms));
    for (size_t r = 0; r < ranks_.size(); ++r) {
      ranks_[r]->comm = comms[r];
      ranks_[r]->comm_aborted = false;
    }
  }
  if (config_.mode == DeviceMode::kMpi) {
    // Every process reaches each collective on every path: process 0 sends, with the id,
    // whether it could make one, and every process says whether it can join before the
    // communicator's (collective) initialisation.
    const int r = mpi::Rank();
    struct {
      ncclUniqueId id;
      int ok;
    } root{};
    Status mine = Status::Ok();
    if (r == 0) {
      const ncclResult_t made = ncclGetUniqueId(&root.id);
      root.ok = made == ncclSuccess ? 1 : 0;
      if (made != ncclSuccess) mine = NcclStatus(made, "ncclGetUniqueId(&id)", At(r));
    }
    mpi::Broadcast(&root, sizeof(root), 0);
    if (mine.ok() && root.ok == 0) {
      mine = Status::Unavailable(
          "process 0 could not make NCCL's unique id (its error is in its own log)");
    }
    if (mine.ok()) {
      const cudaError_t set = cudaSetDevice(ranks_[r]->device);
      if (set != cudaSuccess) mine = CudaStatus(set, "cudaSetDevice", At(r));
    }
    if (mpi::AllMin(mine.ok() ? 1 : 0) == 0) {
      return mine.ok() ? Status::Unavailable(
                             "another process could not join the NCCL communicator (its error "
                             "is in its own log)")
                       : mine;
    }
    EPLB_RETURN_IF_ERROR(CreateRankComm(root.id, topology_.num_ranks(), r, &ranks_[r]->comm));
    ranks_[r]->comm_aborted = false;
  }
#endif
  return Status::Ok();
}

DeviceBackend::~DeviceBackend() {
  JoinWorkers();
  // Teardown cannot report: free what exists, ignoring errors of a device already lost. Every
  // stream drains first, each whatever the others' errors (Synchronize stops at the first): a
  // copy or a step still running may use any buffer.
  for (const auto& state : ranks_) {
    if (!state) continue;  // another process's rank, or one a failed set-up never reached
    cudaSetDevice(state->device);
    for (cudaStream_t stream : {state->main, state->local, state->lane[0], state->lane[1]}) {
      if (stream != nullptr) cudaStreamSynchronize(stream);
    }
  }
  for (auto& state : ranks_) {
    if (!state) continue;
    RankState& s = *state;
    cudaSetDevice(s.device);
#ifdef EPLB_HAVE_NCCL
    ReleaseComm(s.comm, s.comm_aborted);
#endif
    for (cudaStream_t st : {s.main, s.local, s.lane[0], s.lane[1]}) {
      if (st) cudaStreamDestroy(st);
    }
    for (auto* events : {&s.staged, &s.consumed}) {
      for (cudaEvent_t e : *events) {
        if (e) cudaEventDestroy(e);
      }
    }
    for (cudaEvent_t e :
         {s.anchor, s.round_begin[0], s.round_begin[1], s.round_end[0], s.round_end[1]}) {
      if (e) cudaEventDestroy(e);
    }
    for (void* p : {s.pool, static_cast<void*>(s.check_slots), static_cast<void*>(s.step_slots),
                    static_cast<void*>(s.mismatch), static_cast<void*>(s.sink),
                    static_cast<void*>(s.step_scratch)}) {
      if (p) cudaFree(p);
    }
    if (s.backup) cudaFreeHost(s.backup);
  }
}

int DeviceBackend::device_of(int rank) const {
  return ranks_[rank] ? ranks_[rank]->device : -1;
}

bool DeviceBackend::IsLocal(int rank) const {
  return config_.mode != DeviceMode::kMpi || rank == mpi::Rank();
}

int DeviceBackend::AgreeOnStagedLayers(int staged_here) {
  return config_.mode == DeviceMode::kMpi ? mpi::AllMin(staged_here) : staged_here;
}

bool DeviceBackend::AllOk(bool ok_here) {
  return config_.mode == DeviceMode::kMpi ? mpi::AllMin(ok_here ? 1 : 0) == 1 : ok_here;
}

Status DeviceBackend::Fill(const Placement& placement) {
  const int per_gpu = topology_.slots_per_gpu();
  for (int r : local_ranks_) {
    RankState& s = *ranks_[r];
    std::vector<SlotRef> list;
    for (int layer = 0; layer < config_.num_layers; ++layer) {
      for (int slot = r * per_gpu; slot < (r + 1) * per_gpu; ++slot) {
        const int expert = placement.expert_at(layer, slot);
        if (expert != kEmptySlot) list.push_back({live(layer, slot), layer, expert});
      }
    }
    const std::string at = At(r);
    EPLB_CUDA(cudaSetDevice(s.device), at);
    EPLB_CUDA(cudaMemcpyAsync(s.check_slots, list.data(), list.size() * sizeof(SlotRef),
                              cudaMemcpyHostToDevice, s.main),
              at);
    EPLB_CUDA(LaunchFill(s.check_slots, static_cast<int>(list.size()), expert_bytes_ / 8, s.main),
              at);
    EPLB_CUDA(cudaStreamSynchronize(s.main), at);
    s.step_slots_stale = true;
  }
  return Status::Ok();
}

Status DeviceBackend::Verify(const Placement& placement, int layer) {
  if (layer < 0) return CheckSlots(placement, 0, config_.num_layers - 1);
  return CheckSlots(placement, layer, layer);
}

Status DeviceBackend::CheckSlots(const Placement& placement, int first_layer, int last_layer) {
  const int per_gpu = topology_.slots_per_gpu();
  const int ranks = topology_.num_ranks();
  std::vector<std::vector<SlotRef>> lists(ranks);
  std::vector<std::vector<int>> where(ranks);  // global slot of each list entry
  // Launch every rank's check, then collect: ranks on different GPUs check at once.
  for (int r : local_ranks_) {
    RankState& s = *ranks_[r];
    for (int layer = first_layer; layer <= last_layer; ++layer) {
      for (int slot = r * per_gpu; slot < (r + 1) * per_gpu; ++slot) {
        const int expert = placement.expert_at(layer, slot);
        if (expert == kEmptySlot) continue;
        lists[r].push_back({live(layer, slot), layer, expert});
        where[r].push_back(slot);
      }
    }
    const std::string at = At(r);
    EPLB_CUDA(cudaSetDevice(s.device), at);
    EPLB_CUDA(cudaMemcpyAsync(s.check_slots, lists[r].data(), lists[r].size() * sizeof(SlotRef),
                              cudaMemcpyHostToDevice, s.main),
              at);
    EPLB_CUDA(LaunchCheck(s.check_slots, static_cast<int>(lists[r].size()), expert_bytes_ / 8,
                          s.mismatch, s.main),
              at);
  }
  for (int r : local_ranks_) {
    RankState& s = *ranks_[r];
    const std::string at = At(r);
    unsigned long long key = kNoMismatch;
    EPLB_CUDA(cudaSetDevice(s.device), at);
    EPLB_CUDA(cudaMemcpyAsync(&key, s.mismatch, sizeof(key), cudaMemcpyDeviceToHost, s.main), at);
    EPLB_CUDA(cudaStreamSynchronize(s.main), at);
    if (key == kNoMismatch) continue;
    const SlotRef& bad = lists[r][MismatchSlot(key)];
    const uint64_t word = MismatchWord(key);
    uint64_t found = 0;
    EPLB_CUDA(cudaMemcpy(&found, bad.data + word, sizeof(found), cudaMemcpyDeviceToHost), at);
    return Status::Internal(fmt::format(
        "weights check failed: layer {}, slot {} (rank {}) should hold expert {}, but byte {} "
        "onwards reads {:#018x} where the expert's weights have {:#018x}",
        bad.layer, where[r][MismatchSlot(key)], r, bad.expert, word * 8, found,
        PatternWord(bad.layer, bad.expert, word)));
  }
  return Status::Ok();
}

Status DeviceBackend::RunEmulatedStep(double seconds, bool wait) {
  NvtxRange range("step");
  const int per_gpu = topology_.slots_per_gpu();
  const auto ns = static_cast<uint64_t>(seconds * 1e9);
  for (int r : local_ranks_) {
    RankState& s = *ranks_[r];
    const std::string at = At(r);
    EPLB_CUDA(cudaSetDevice(s.device), at);
    if (s.step_slots_stale) {
      std::vector<SlotRef> list;
      for (int layer = 0; layer < config_.num_layers; ++layer) {
        for (int slot = r * per_gpu; slot < (r + 1) * per_gpu; ++slot) {
          list.push_back({live(layer, slot), layer, 0});
        }
      }
      EPLB_CUDA(cudaMemcpyAsync(s.step_slots, list.data(), list.size() * sizeof(SlotRef),
                                cudaMemcpyHostToDevice, s.main),
                at);
      s.step_count = static_cast<int>(list.size());
      s.step_slots_stale = false;
    }
    EPLB_CUDA(LaunchEmulatedStep(ns, s.step_slots, s.step_count, expert_bytes_ / 8, s.sink,
                                 s.step_scratch, s.main),
              at);
  }
  if (!wait) return Status::Ok();
  for (int r : local_ranks_) {
    EPLB_CUDA(cudaSetDevice(ranks_[r]->device), At(r));
    EPLB_CUDA(cudaStreamSynchronize(ranks_[r]->main), At(r));
  }
  // A step ends on every rank together, as its all-to-all would make it.
  if (config_.mode == DeviceMode::kMpi) mpi::Barrier();
  return Status::Ok();
}

Result<std::vector<uint64_t>> DeviceBackend::TakeStepChecksums() {
  std::vector<uint64_t> out;
  for (int r : local_ranks_) {
    RankState& s = *ranks_[r];
    uint64_t sum = 0;
    EPLB_CUDA(cudaSetDevice(s.device), At(r));
    EPLB_CUDA(cudaMemcpyAsync(&sum, s.sink, sizeof(sum), cudaMemcpyDeviceToHost, s.main), At(r));
    EPLB_CUDA(cudaMemsetAsync(s.sink, 0, sizeof(*s.sink), s.main), At(r));
    EPLB_CUDA(cudaStreamSynchronize(s.main), At(r));
    out.push_back(sum);
  }
  return out;
}

Status DeviceBackend::Synchronize() {
  for (int r : local_ranks_) {
    const RankState& s = *ranks_[r];
    EPLB_CUDA(cudaSetDevice(s.device), At(r));
    for (cudaStream_t stream : {s.main, s.local, s.lane[0], s.lane[1]}) {
      if (stream != nullptr) EPLB_CUDA(cudaStreamSynchronize(stream), At(r));
    }
  }
  return Status::Ok();
}

}  // namespace eplb::device
