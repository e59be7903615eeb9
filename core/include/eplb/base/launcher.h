// How this process was started among others, read from the environment the launchers set.
//   MPI (Open MPI's mpirun, MPICH/Hydra's PMI, PMIx, Slurm's srun tasks): processes that run
//     together and can talk (device runs use MPI itself; sweep only splits its points).
//   A Slurm job array (sbatch --array): tasks that may run at different times, one after
//     another or all at once, and never talk; each takes its share of a sweep's points, and
//     the last to finish writes the report.
// One function for every command, so that they agree on what a launch is.
//
// Thread-safety: reads the environment; call before starting threads that change it.
#pragma once

#include <string>

namespace eplb {

enum class LaunchKind { kAlone, kMpi, kSlurmArray };

struct Launch {
  LaunchKind kind = LaunchKind::kAlone;
  int index = 0;  // this process's rank or task, 0-based
  int count = 1;  // how many there are
  // "MPI rank 2 of 4", "Slurm array task 3 of 8", "one process".
  std::string Describe() const;
};

// MPI takes precedence (srun inside an array task launches MPI ranks of that task). A Slurm
// array task's index counts from SLURM_ARRAY_TASK_MIN; the count is SLURM_ARRAY_TASK_COUNT.
// Malformed values are treated as no launch. EPLB_LAUNCH=alone (kLaunchVariable) makes this one
// process whatever the launchers' variables say: the Python module sets it, since a notebook
// inside mpirun or a Slurm job runs its whole study itself, not one rank's share of it.
inline constexpr const char* kLaunchVariable = "EPLB_LAUNCH";
Launch DetectLaunch();

}  // namespace eplb
