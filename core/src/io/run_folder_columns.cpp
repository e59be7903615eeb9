// The run folder's CSV files: the writer and the reader of each, and RunFolderFiles(), all
// driven by the column tables (run_folder_fields.cpp, run_folder_fields.h).
#include "io/run_folder_columns.h"

#include <array>
#include <functional>
#include <iterator>

#include <fmt/format.h>

#include "eplb/base/csv.h"
#include "eplb/base/excerpt.h"
#include "eplb/engine/gpu_memory.h"
#include "eplb/io/output_folders.h"
#include "eplb/io/run_folder.h"
#include "eplb/model/names.h"
#include "io/run_folder_fields.h"

namespace eplb::run_folder {
namespace {

template <typename Row>
std::string Header(const std::vector<Field<Row>>& fields) {
  std::string out;
  for (const Field<Row>& f : fields) {
    if (!out.empty()) out += ',';
    out += f.doc.name;
  }
  return out;
}

template <typename Row>
std::string WriteCsv(const std::vector<Field<Row>>& fields, const std::vector<Row>& rows) {
  std::string out = Header(fields) + "\n";
  auto it = std::back_inserter(out);
  for (const Row& row : rows) {
    for (size_t i = 0; i < fields.size(); ++i) {
      if (i > 0) out += ',';
      const Cell c = fields[i].get(row);
      switch (fields[i].format) {
        case Format::kInt32:
        case Format::kInt64:
          fmt::format_to(it, "{}", c.i);
          break;
        case Format::kReal9:
          fmt::format_to(it, "{:.9g}", c.d);
          break;
        case Format::kFixed6:
          fmt::format_to(it, "{:.6f}", c.d);
          break;
        case Format::kFixed3:
          fmt::format_to(it, "{:.3f}", c.d);
          break;
        case Format::kLink:
          out += LinkClassName(static_cast<LinkClass>(c.i));
          break;
        case Format::kReason:
          out += RearrangeReasonName(static_cast<RearrangeReason>(c.i));
          break;
      }
    }
    out += '\n';
  }
  return out;
}

template <typename Row>
Status ParseCell(const CsvLines& csv, const Field<Row>& field, std::string_view text, Cell& c) {
  const std::string_view name = field.doc.name;
  switch (field.format) {
    case Format::kInt32: {
      int32_t v = 0;
      if (!ParseCsvInt32(text, v)) {
        return csv.Error(fmt::format("{} '{}' is not a 32-bit integer", name, Excerpt(text)));
      }
      c.i = v;
      return Status::Ok();
    }
    case Format::kInt64:
      if (!ParseCsvInt64(text, c.i)) {
        return csv.Error(fmt::format("{} '{}' is not an integer", name, Excerpt(text)));
      }
      return Status::Ok();
    case Format::kReal9:
    case Format::kFixed6:
    case Format::kFixed3:
      if (!ParseCsvDouble(text, c.d)) {
        return csv.Error(fmt::format("{} '{}' is not a finite number", name, Excerpt(text)));
      }
      return Status::Ok();
    case Format::kLink:
      if (const auto link = kLinkClassNames.Find(text)) {
        c.i = static_cast<int64_t>(*link);
        return Status::Ok();
      }
      return csv.Error(fmt::format("{} '{}': valid values are {}", name, Excerpt(text),
                                   kLinkClassNames.Joined()));
    case Format::kReason:
      if (const auto reason = kRearrangeReasonNames.Find(text)) {
        c.i = static_cast<int64_t>(*reason);
        return Status::Ok();
      }
      return csv.Error(fmt::format("{} '{}': valid values are {}", name, Excerpt(text),
                                   kRearrangeReasonNames.Joined()));
  }
  return Status::Ok();
}

// Reads the header: the file's columns, all of `fields` or, in a folder written before some of
// the columns added later, those before them (every prefix that ends before one of those).
template <typename Row>
Result<size_t> ReadHeader(CsvLines& csv, const std::vector<Field<Row>>& fields) {
  std::vector<size_t> counts = {fields.size()};
  for (size_t i = fields.size(); i-- > 0;) {
    if (fields[i].added_later) counts.push_back(i);
  }
  std::vector<std::string> headers;
  for (size_t count : counts) {
    const std::vector<Field<Row>> first(fields.begin(),
                                        fields.begin() + static_cast<std::ptrdiff_t>(count));
    headers.push_back(Header(first));
  }
  EPLB_ASSIGN_OR_RETURN(const size_t which, csv.ExpectHeaderOf(headers));
  return counts[which];
}

// The typed columns of a table whose file has the first `count` of `fields`.
template <typename Row>
std::vector<RunFolderTable::Column> TypedColumns(const std::vector<Field<Row>>& fields,
                                                 size_t count) {
  using Kind = RunFolderTable::Column::Kind;
  std::vector<RunFolderTable::Column> columns;
  for (size_t i = 0; i < count; ++i) {
    const Format f = fields[i].format;
    const Kind kind = f == Format::kInt32 || f == Format::kInt64   ? Kind::kInteger
                      : f == Format::kLink || f == Format::kReason ? Kind::kText
                                                                   : Kind::kReal;
    columns.push_back({fields[i].doc.name, kind, {}, {}, {}});
  }
  return columns;
}

void Append(RunFolderTable::Column& column, const Cell& c, std::string_view text) {
  switch (column.kind) {
    case RunFolderTable::Column::Kind::kInteger:
      column.integers.push_back(c.i);
      break;
    case RunFolderTable::Column::Kind::kReal:
      column.reals.push_back(c.d);
      break;
    case RunFolderTable::Column::Kind::kText:
      column.texts.emplace_back(text);
      break;
  }
}

// `check` (optional) returns what is wrong with a parsed row, or "" when nothing is. `typed`,
// when given, receives the columns as they are parsed (RunFolderTable), with `file` its name.
template <typename Row>
Result<std::vector<Row>> ParseCsv(const std::vector<Field<Row>>& fields, std::string_view text,
                                  const std::string& name,
                                  const std::function<std::string(const Row&)>& check,
                                  std::string_view file, RunFolderTable* typed) {
  CsvLines csv(text, name);
  EPLB_ASSIGN_OR_RETURN(const size_t columns, ReadHeader(csv, fields));
  if (typed != nullptr) *typed = {file, TypedColumns(fields, columns)};
  std::vector<Row> rows;
  std::vector<std::string_view> values;
  while (csv.Next(values)) {
    EPLB_RETURN_IF_ERROR(csv.CheckFieldCount(values, columns));
    Row row{};
    for (size_t i = 0; i < columns; ++i) {
      Cell c;
      EPLB_RETURN_IF_ERROR(ParseCell(csv, fields[i], values[i], c));
      fields[i].set(row, c);
      if (typed != nullptr) Append(typed->columns[i], c, values[i]);
    }
    if (check) {
      if (const std::string wrong = check(row); !wrong.empty()) return csv.Error(wrong);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

template <typename Row>
std::vector<RunFolderColumn> Docs(const std::vector<Field<Row>>& fields) {
  std::vector<RunFolderColumn> out;
  for (const Field<Row>& f : fields) out.push_back(f.doc);
  return out;
}

}  // namespace

std::string MetricsCsv(const std::vector<StepRecord>& steps) {
  return WriteCsv(MetricsFields(), steps);
}
std::string TransfersCsv(const std::vector<TransferRecord>& transfers) {
  return WriteCsv(TransferFields(), transfers);
}
std::string RearrangementsCsv(const std::vector<RearrangementRow>& rows) {
  return WriteCsv(RearrangementFields(), rows);
}
int64_t ResidentBytes(const Scenario& scenario) {
  // Every run checked that the model fits its GPUs; a folder's scenario may not have been run.
  const double resident = GpuMemoryOf(scenario).resident();
  return resident > 0 && resident < 1e18 ? std::llround(resident) : 0;
}

std::string GpuMemoryCsv(const std::vector<RearrangementRecord>& rearrangements,
                         int64_t resident_bytes) {
  std::vector<GpuMemoryRow> rows;
  for (size_t i = 0; i < rearrangements.size(); ++i) {
    const RearrangementRecord& r = rearrangements[i];
    for (size_t rank = 0; rank < r.staging_peak_bytes.size(); ++rank) {
      const int64_t staged = r.staging_peak_bytes[rank];
      rows.push_back(
          {static_cast<int>(i), r.step, static_cast<int>(rank), staged, resident_bytes + staged});
    }
  }
  return WriteCsv(GpuMemoryFields(), rows);
}
std::string LayerBalanceCsv(const std::vector<LayerBalanceSpan>& spans) {
  std::vector<LayerBalanceRow> rows;
  for (const LayerBalanceSpan& span : spans) {
    for (size_t l = 0; l < span.balancedness.size(); ++l) {
      rows.push_back({span.first_step, span.last_step, static_cast<int>(l), span.balancedness[l]});
    }
  }
  return WriteCsv(LayerBalanceFields(), rows);
}

namespace {

// What a reader must refuse in any row: the writer never writes it.
std::string Negative(const char* column, double v) {
  return v < 0 ? fmt::format("{} is {}; it is never negative", column, v) : std::string();
}

}  // namespace

static Result<std::vector<StepRecord>> ParseMetricsRows(std::string_view text,
                                                        const std::string& name,
                                                        RunFolderTable* typed) {
  int expected = 0;
  double last_start = 0;
  return ParseCsv<StepRecord>(
      MetricsFields(), text, name,
      [&](const StepRecord& r) {
        if (r.step != expected) {
          return fmt::format("step {} where step {} comes next; steps are written in order", r.step,
                             expected);
        }
        ++expected;
        if (r.start_s < last_start) {
          return fmt::format("start_s {} is before the previous step's {}", r.start_s, last_start);
        }
        last_start = r.start_s;
        if (r.balancedness < 0 || r.balancedness > 1) {
          return fmt::format("balancedness {} is outside [0, 1]", r.balancedness);
        }
        for (const auto& [column, v] : {std::pair{"start_s", r.start_s},
                                        {"step_s", r.step_s},
                                        {"idle_step_s", r.idle_s},
                                        {"stalled_s", r.stalled_s},
                                        {"tokens_lost", r.tokens_lost},
                                        {"serving_gpus", static_cast<double>(r.serving_gpus)},
                                        {"imbalance_ratio", r.imbalance_ratio},
                                        {"bytes_in_flight", static_cast<double>(r.bytes_in_flight)},
                                        {"latency_s", r.latency_s}}) {
          if (std::string wrong = Negative(column, v); !wrong.empty()) return wrong;
        }
        return std::string();
      },
      folder_file::kMetrics, typed);
}

Result<std::vector<StepRecord>> ParseMetricsCsv(std::string_view text, const std::string& name,
                                                RunFolderTable* typed) {
  EPLB_ASSIGN_OR_RETURN(std::vector<StepRecord> steps, ParseMetricsRows(text, name, typed));
  // A folder written before latency_s: each step's latency from the steps' ends, as the loop
  // records it (the first step's own faults' stall is not in the file).
  const bool recorded =
      std::any_of(steps.begin(), steps.end(), [](const StepRecord& r) { return r.latency_s > 0; });
  for (size_t i = 0; !recorded && i < steps.size(); ++i) {
    const double previous_end =
        i == 0 ? steps[0].start_s : steps[i - 1].start_s + steps[i - 1].step_s;
    steps[i].latency_s = steps[i].start_s + steps[i].step_s - previous_end;
  }
  return steps;
}
Result<std::vector<TransferRecord>> ParseTransfersCsv(std::string_view text,
                                                      const std::string& name, int layers,
                                                      int experts, int gpus, double run_end_s,
                                                      RunFolderTable* typed) {
  const double last_end_s = TransferEndLimit(run_end_s);
  return ParseCsv<TransferRecord>(
      TransferFields(), text, name,
      [&](const TransferRecord& t) {
        const bool inside = t.layer >= 0 && t.layer < layers && t.src_rank >= 0 &&
                            t.src_rank < gpus && t.dst_rank >= 0 && t.dst_rank < gpus;
        if (!inside) {
          return fmt::format(
              "layer {} / ranks {} -> {} outside the scenario's {} layers and {} GPUs", t.layer,
              t.src_rank, t.dst_rank, layers, gpus);
        }
        if (t.expert < 0 || t.expert >= experts) {
          return fmt::format("expert {} is outside the scenario's 0..{}", t.expert, experts - 1);
        }
        if (t.bytes <= 0) return fmt::format("bytes is {}; a transfer moves at least 1", t.bytes);
        if (t.start_s < 0) return Negative("start_s", t.start_s);
        if (t.end_s < t.start_s) {
          return fmt::format("end_s {} is before start_s {}", t.end_s, t.start_s);
        }
        if (!(t.end_s <= last_end_s)) {
          return fmt::format(
              "end_s {} is past the run's end, {} s (the last step's end in metrics.csv); a "
              "transfer ends within the run, or by {} s at the latest if its round was in flight "
              "when the run ended",
              t.end_s, run_end_s, last_end_s);
        }
        return std::string();
      },
      folder_file::kTransfers, typed);
}
Result<std::vector<RearrangementRow>> ParseRearrangementsCsv(std::string_view text,
                                                             const std::string& name,
                                                             RunFolderTable* typed) {
  int last_step = -1;
  return ParseCsv<RearrangementRow>(
      RearrangementFields(), text, name,
      [&](const RearrangementRow& r) {
        if (r.step < last_step) {
          return fmt::format("step {} is before the previous rearrangement's {}", r.step,
                             last_step);
        }
        last_step = r.step;
        if (r.end_s != -1 && r.end_s < r.start_s) {
          return fmt::format("end_s {} is before start_s {} (and not -1, unfinished)", r.end_s,
                             r.start_s);
        }
        for (const auto& [column, v] :
             {std::pair{"start_s", r.start_s},
              {"policy_ms", r.policy_ms},
              {"layers", static_cast<double>(r.layers)},
              {"transfers", static_cast<double>(r.transfers)},
              {"bytes_nvlink", static_cast<double>(r.bytes[LinkClass::kNvlink])},
              {"bytes_nic", static_cast<double>(r.bytes[LinkClass::kNic])},
              {"bytes_reloaded", static_cast<double>(r.bytes_reloaded)},
              {"predicted_makespan_s", r.predicted_makespan_s},
              {"lower_bound_s", r.lower_bound_s}}) {
          if (std::string wrong = Negative(column, v); !wrong.empty()) return wrong;
        }
        for (double b : {r.window_balancedness_before, r.window_balancedness_after,
                         r.window_balancedness_bound, r.following_balancedness}) {
          if (b < 0 || b > 1) return fmt::format("a balancedness of {} is outside [0, 1]", b);
        }
        return std::string();
      },
      folder_file::kRearrangements, typed);
}

Status ParseGpuMemoryCsv(std::string_view text, const std::string& name, int gpus,
                         int64_t resident_bytes, std::vector<RearrangementRecord>& rearrangements,
                         RunFolderTable* typed) {
  const int count = static_cast<int>(rearrangements.size());
  int last = -1, next_rank = 0;
  auto rows = ParseCsv<GpuMemoryRow>(
      GpuMemoryFields(), text, name,
      [&](const GpuMemoryRow& r) {
        if (next_rank == 0) {
          if (r.rearrangement <= last || r.rearrangement >= count) {
            return fmt::format("rearrangement {} where one of {}..{} comes next", r.rearrangement,
                               last + 1, count - 1);
          }
          last = r.rearrangement;
        } else if (r.rearrangement != last) {
          return fmt::format("rearrangement {} where rank {} of rearrangement {} comes next",
                             r.rearrangement, next_rank, last);
        }
        if (r.rank != next_rank) {
          return fmt::format("rank {} where rank {} comes next (0..{} per rearrangement)", r.rank,
                             next_rank, gpus - 1);
        }
        next_rank = next_rank + 1 == gpus ? 0 : next_rank + 1;
        if (r.step != rearrangements[static_cast<size_t>(r.rearrangement)].step) {
          return fmt::format("step {} but rearrangements.csv has rearrangement {} at step {}",
                             r.step, r.rearrangement,
                             rearrangements[static_cast<size_t>(r.rearrangement)].step);
        }
        if (std::string wrong = Negative("staging_peak_bytes", double(r.staging_peak_bytes));
            !wrong.empty())
          return wrong;
        if (r.staging_peak_bytes > (int64_t{1} << 60) ||
            r.peak_memory_bytes != resident_bytes + r.staging_peak_bytes) {
          return fmt::format(
              "peak_memory_bytes {} is not the scenario's resident {} + staging_peak_bytes {}",
              r.peak_memory_bytes, resident_bytes, r.staging_peak_bytes);
        }
        return std::string();
      },
      folder_file::kGpuMemory, typed);
  if (!rows.ok()) return rows.status();
  if (next_rank != 0) {
    return Status::InvalidArgument(
        fmt::format("{}: rearrangement {} has {} of the {} ranks", name, last, next_rank, gpus));
  }
  for (const GpuMemoryRow& r : *rows) {
    rearrangements[static_cast<size_t>(r.rearrangement)].staging_peak_bytes.push_back(
        r.staging_peak_bytes);
  }
  return Status::Ok();
}

Result<std::vector<LayerBalanceSpan>> ParseLayerBalanceCsv(std::string_view text,
                                                           const std::string& name, int layers,
                                                           int steps, RunFolderTable* typed) {
  int next_step = 0, next_layer = 0;
  auto rows = ParseCsv<LayerBalanceRow>(
      LayerBalanceFields(), text, name,
      [&](const LayerBalanceRow& r) {
        if (r.layer != next_layer) {
          return fmt::format("layer {} where layer {} comes next (0..{} per span)", r.layer,
                             next_layer, layers - 1);
        }
        if (r.first_step != next_step || r.last_step < r.first_step || r.last_step >= steps) {
          return fmt::format("steps {}..{} where a span from step {} within 0..{} comes next",
                             r.first_step, r.last_step, next_step, steps - 1);
        }
        if (r.balancedness < 0 || r.balancedness > 1)
          return fmt::format("balancedness {} is outside [0, 1]", r.balancedness);
        if (++next_layer == layers) {
          next_layer = 0;
          next_step = r.last_step + 1;
        }
        return std::string();
      },
      folder_file::kLayerBalancedness, typed);
  if (!rows.ok()) return rows.status();
  if (next_layer != 0) {
    return Status::InvalidArgument(
        fmt::format("{}: the last span has {} of the {} layers", name, next_layer, layers));
  }
  std::vector<LayerBalanceSpan> spans;
  for (const LayerBalanceRow& r : *rows) {
    if (r.layer == 0) spans.push_back({r.first_step, r.last_step, {}});
    spans.back().balancedness.push_back(static_cast<float>(r.balancedness));
  }
  return spans;
}

}  // namespace eplb::run_folder

namespace eplb {

std::span<const RunFolderFile> RunFolderFiles() {
  using namespace run_folder;
  static const std::vector<RunFolderColumn> metrics = Docs(MetricsFields());
  static const std::vector<RunFolderColumn> transfers = Docs(TransferFields());
  static const std::vector<RunFolderColumn> rearrangements = Docs(RearrangementFields());
  static const std::vector<RunFolderColumn> layer_balance = Docs(LayerBalanceFields());
  static const std::vector<RunFolderColumn> gpu_memory = Docs(GpuMemoryFields());
  static const std::array<RunFolderFile, 11> files = {{
      {folder_file::kScenario, "the resolved scenario, every field written out", {}},
      {folder_file::kMetrics, "one line per step", metrics},
      {folder_file::kTransfers, "one line per expert transfer", transfers},
      {folder_file::kRearrangements, "one line per rearrangement", rearrangements},
      {folder_file::kPlacements,
       "each layer's initial placement (step −1), then one line per layer commit: step, time_s, "
       "layer, phy2log",
       {}},
      {folder_file::kLoads,
       "one line per rearrangement: the window's load (tokens) its policy saw",
       {}},
      {folder_file::kLayerBalancedness,
       "per span of steps (at most 200 spans) and layer, the layer's balancedness", layer_balance},
      {folder_file::kGpuMemory,
       "per rearrangement and GPU, the GPU's staging and memory at its fullest", gpu_memory},
      {folder_file::kTrace, "Chrome/Perfetto trace events of steps, transfers and commits", {}},
      {folder_file::kSummary, "the run's summary numbers (RunSummary)", {}},
      {kManifestName,
       "every other file with its size and checksum (base/file_io.h), written last: a folder "
       "without it, or "
       "whose files differ from it, is not a finished run",
       {}},
  }};
  return files;
}

}  // namespace eplb
