// DetectLaunch against the environments the launchers set.
#include "eplb/base/launcher.h"

#include <cstdlib>
#include <map>
#include <string>

#include <gtest/gtest.h>

namespace eplb {
namespace {

constexpr const char* kVars[] = {"OMPI_COMM_WORLD_RANK",
                                 "OMPI_COMM_WORLD_SIZE",
                                 "PMI_RANK",
                                 "PMI_SIZE",
                                 "SLURM_PROCID",
                                 "SLURM_NTASKS",
                                 "SLURM_ARRAY_TASK_ID",
                                 "SLURM_ARRAY_TASK_MIN",
                                 "SLURM_ARRAY_TASK_COUNT"};

Launch With(const std::map<std::string, std::string>& env) {
  for (const char* v : kVars) unsetenv(v);
  unsetenv(kLaunchVariable);
  for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
  const Launch l = DetectLaunch();
  for (const char* v : kVars) unsetenv(v);
  unsetenv(kLaunchVariable);
  return l;
}

TEST(Launcher, AProcessAskedToRunAloneIgnoresTheLaunchersVariables) {
  const std::map<std::string, std::string> mpi = {{"OMPI_COMM_WORLD_RANK", "1"},
                                                  {"OMPI_COMM_WORLD_SIZE", "2"},
                                                  {"SLURM_ARRAY_TASK_ID", "1"},
                                                  {"SLURM_ARRAY_TASK_COUNT", "2"}};
  EXPECT_EQ(With(mpi).kind, LaunchKind::kMpi);
  auto alone = mpi;
  alone[kLaunchVariable] = "alone";
  EXPECT_EQ(With(alone).kind, LaunchKind::kAlone);
  // Only "alone" asks for it; anything else leaves the launch as the launchers set it.
  alone[kLaunchVariable] = "1";
  EXPECT_EQ(With(alone).kind, LaunchKind::kMpi);
}

TEST(Launcher, ReadsEachLauncherAndRefusesNonsense) {
  EXPECT_EQ(With({}).kind, LaunchKind::kAlone);
  const Launch mpi = With({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
  EXPECT_EQ(mpi.kind, LaunchKind::kMpi);
  EXPECT_EQ(mpi.index, 2);
  EXPECT_EQ(mpi.Describe(), "MPI rank 2 of 4");
  EXPECT_EQ(With({{"PMI_RANK", "1"}, {"PMI_SIZE", "3"}}).index, 1);
  // A batch script is Slurm task 0 of 1: no launch of several.
  EXPECT_EQ(With({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}).kind, LaunchKind::kAlone);
  const Launch array = With({{"SLURM_ARRAY_TASK_ID", "7"},
                             {"SLURM_ARRAY_TASK_MIN", "5"},
                             {"SLURM_ARRAY_TASK_COUNT", "4"},
                             {"SLURM_PROCID", "0"},
                             {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(array.kind, LaunchKind::kSlurmArray);
  EXPECT_EQ(array.index, 2);
  EXPECT_EQ(array.Describe(), "Slurm array task 2 of 4");
  // MPI ranks inside an array task split that task's work, not the array's.
  EXPECT_EQ(With({{"SLURM_ARRAY_TASK_ID", "1"},
                  {"SLURM_ARRAY_TASK_COUNT", "2"},
                  {"OMPI_COMM_WORLD_RANK", "0"},
                  {"OMPI_COMM_WORLD_SIZE", "2"}})
                .kind,
            LaunchKind::kMpi);
  EXPECT_EQ(With({{"OMPI_COMM_WORLD_RANK", "x"}, {"OMPI_COMM_WORLD_SIZE", "4"}}).kind,
            LaunchKind::kAlone);
  EXPECT_EQ(With({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}}).kind,
            LaunchKind::kAlone);
  EXPECT_EQ(With({{"SLURM_ARRAY_TASK_ID", "9"}, {"SLURM_ARRAY_TASK_COUNT", "4"}}).kind,
            LaunchKind::kAlone);
}

}  // namespace
}  // namespace eplb
