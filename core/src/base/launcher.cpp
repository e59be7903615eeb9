#include "eplb/base/launcher.h"

#include <cstdlib>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "eplb/base/csv.h"

namespace eplb {
namespace {

std::optional<int> IntFromEnv(const char* name) {
  const char* v = std::getenv(name);
  int32_t out = 0;
  if (v == nullptr || !ParseCsvInt32(v, out)) return std::nullopt;
  return out;
}

}  // namespace

std::string Launch::Describe() const {
  switch (kind) {
    case LaunchKind::kAlone:
      return "one process";
    case LaunchKind::kMpi:
      return fmt::format("MPI rank {} of {}", index, count);
    case LaunchKind::kSlurmArray:
      return fmt::format("Slurm array task {} of {}", index, count);
  }
  return "?";
}

Launch DetectLaunch() {
  if (const char* asked = std::getenv(kLaunchVariable);
      asked != nullptr && std::string_view(asked) == "alone") {
    return {};
  }
  constexpr std::pair<const char*, const char*> kMpi[] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"PMI_RANK", "PMI_SIZE"},
      {"SLURM_PROCID", "SLURM_NTASKS"}};
  for (const auto& [rank_var, size_var] : kMpi) {
    const auto rank = IntFromEnv(rank_var), size = IntFromEnv(size_var);
    if (rank && size && *size >= 1 && *rank >= 0 && *rank < *size) {
      // A batch script runs as task 0 of 1: that is no launch of several.
      if (*size == 1) break;
      return {LaunchKind::kMpi, *rank, *size};
    }
  }
  const auto id = IntFromEnv("SLURM_ARRAY_TASK_ID"), min = IntFromEnv("SLURM_ARRAY_TASK_MIN"),
             count = IntFromEnv("SLURM_ARRAY_TASK_COUNT");
  if (id && count && *count >= 1) {
    const int index = *id - min.value_or(0);
    if (index >= 0 && index < *count) return {LaunchKind::kSlurmArray, index, *count};
  }
  return {};
}

}  // namespace eplb
