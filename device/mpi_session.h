// MPI for device runs whose ranks are processes (`mpirun -np R eplb device-run --mpi`): one
// rank, and one GPU, per process. Only what the device part needs: start and stop, who we are,
// the minimum over processes (the rearranger's gate), a barrier, a broadcast (the NCCL id) and
// gathering the transfers to rank 0. Built without MPI, Init says so and the rest acts as one
// process.
//
// Thread-safety: MPI runs with MPI_THREAD_FUNNELED; call from the foreground thread only.
#pragma once

#include <cstddef>
#include <vector>

#include "eplb/base/status.h"
#include "eplb/engine/run_result.h"

namespace eplb::device::mpi {

// Whether the process was started by an MPI launcher (mpirun, srun).
bool Launched();
// Starts MPI once (later calls do nothing); MPI is finalised at exit.
Status Init();
bool Initialized();

int Rank();       // 0 without MPI
int Size();       // 1 without MPI
int LocalRank();  // among the processes on this node, for choosing the GPU

int AllMin(int value);
void Barrier();
void Broadcast(void* data, size_t bytes, int root);
// Element by element, the largest of every process's `values` (all the same length), in place.
void AllMax(std::vector<int64_t>& values);
// Every process's transfers, in rank 0's result (others get theirs back unchanged).
std::vector<TransferRecord> GatherTransfers(const std::vector<TransferRecord>& mine);

}  // namespace eplb::device::mpi
