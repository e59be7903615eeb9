// Reading recorded expert loads: eplb's own files and the serving engines'.
//
// A load file holds a series of steps, each `layers × experts` token-expert assignments. Every
// layout below is read as the series it is; a single matrix is a series of one step. What the
// reader accepts:
//
//   CSV, wide   one line per layer, one field per expert; blank and '#' lines skipped. An
//               optional header row (any non-numeric first line) names the columns; leading
//               columns named `step`, `layer`, `index`, `Unnamed: 0` or left empty (pandas'
//               index) are index columns: `step` groups lines into steps, `layer` must count
//               0, 1, ... within a step, the others are dropped.
//   CSV, long   a header `step,layer,expert,tokens` (or `layer,expert,tokens` for one step), in
//               any column order; cells of one step may come in any order and add up.
//   JSON        `[layer][expert]`, `[step][layer][expert]`, or an object holding either under
//               `load`, `logical_count` (SGLang) or `steps` (eplb's recorded loads).
//   SGLang      a `.pt` dump of its expert-distribution recorder (`stat` mode: `logical_count`
//               [steps, layers, experts]; `per_pass`/`per_token` modes: `records` of
//               `global_physical_count` summed over ranks per forward pass and folded to logical
//               experts through the dump's `last_physical_to_logical_map`), or a folder of them;
//               and vLLM's `expert_load_window` [window, layers, physical slots] saved with its
//               `physical_to_logical_map` (docs/rebalance.md). Read in C++ (torch_dump.cpp): the
//               zip archive and its pickle as data, with an exact allow-list of globals, so no code
//               in a dump ever runs (formats/torch_pickle.h).
//   TensorRT-LLM  its statistics folder (EXPERT_STATISTIC_PATH): `meta_info.json` with
//               `num_experts`, and `rank*.safetensors` holding one tensor per `{iter}_{layer}`,
//               summed over ranks; iterations are the steps, MoE layers in ascending order.
//
// Loads counted per physical slot (vLLM's windows) are folded to logical experts through a
// placement: LoadReadOptions::physical_map. Errors name the file, the line (CSV), the JSON path
// or tensor, the value and what would be valid.
//
// Thread-safety: the functions share no state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "eplb/base/file_io.h"
#include "eplb/base/status.h"
#include "eplb/model/load.h"
#include "eplb/model/placement.h"

namespace eplb {

// Recorded load over time: at least one step, all of one shape.
struct LoadSeries {
  std::vector<LoadMatrix> steps;

  int layers() const { return steps.empty() ? 0 : static_cast<int>(steps[0].rows()); }
  int experts() const { return steps.empty() ? 0 : static_cast<int>(steps[0].cols()); }
  // The load over the whole series, as a policy's window sees it.
  LoadMatrix Total() const;
  // Consecutive steps summed into at most `max_chunks` chunks of equal length (the last may be
  // shorter), oldest first, as the simulator's EPLB loop cuts its window for policies that
  // look at time.
  std::vector<LoadMatrix> Chunks(int max_chunks) const;
  // How many consecutive steps each of Chunks' chunks sums, for `steps` steps: what a caller that
  // sums steps as it reads them (without a LoadSeries of every step) cuts by.
  static int64_t StepsPerChunk(int64_t steps, int max_chunks);
};

struct LoadReadOptions {
  // The logical experts and layers the caller expects; 0 accepts any. A file of another shape
  // is refused with both numbers named.
  int experts = 0;
  int layers = 0;
  // When set, the file's columns are physical slots (vLLM's windows): each is added to the
  // logical expert this placement puts in the slot. Its slot count must equal the width.
  const Placement* physical_map = nullptr;
  // What to call the options in errors, e.g. "--experts" or "model.experts".
  std::string experts_name = "--experts";
  std::string layers_name = "the layer count";
};

// Chooses the reader by what `path` is: a folder (TensorRT-LLM statistics, or SGLang dumps), a
// zip archive (PyTorch's `.pt`), JSON by its first character ('[' or '{'), otherwise CSV.
Result<LoadSeries> ReadLoadSeries(const std::string& path, const LoadReadOptions& options = {});
Result<LoadSeries> ParseLoadCsvSeries(std::string_view text, const std::string& name);
Result<LoadSeries> ParseLoadJsonSeries(std::string_view text, const std::string& name);

// The series' total: a window's load, for callers that need no time.
Result<LoadMatrix> ReadLoadFile(const std::string& path, const LoadReadOptions& options = {});
Result<LoadMatrix> ParseLoadCsv(std::string_view text, const std::string& name);
Result<LoadMatrix> ParseLoadJson(std::string_view text, const std::string& name);

// The engines' recordings (trtllm_statistics.cpp, torch_dump.cpp), each checked and returned as a
// series.
Result<LoadSeries> ReadTrtllmStatistics(const std::string& folder);
Result<LoadSeries> ReadTorchDump(const std::string& path);

// Folds `series`, whose columns are the physical slots of `map`, onto logical experts.
Result<LoadSeries> FoldPhysicalLoad(const LoadSeries& series, const Placement& map,
                                    const std::string& name);

// Every step is bounded so that a hostile file cannot make eplb allocate without limit.
inline constexpr int64_t kMaxSeriesBytes = int64_t{4} << 30;

}  // namespace eplb
