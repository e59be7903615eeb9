// eplb validate --published: every published figure of scenarios/published/figures.yaml
// simulated from its scenario, as a table and as published.json (usecases/published.h). Runs on the
// core alone, so it needs neither a GPU nor the simulator's SimGrid part.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli_util.h"
#include "commands.h"
#include "eplb/base/file_io.h"
#include "eplb/io/output_folders.h"
#include "eplb/usecases/published.h"

namespace eplb::cli {
namespace {

namespace fs = std::filesystem;

// The shipped figures: from the working folder (a clone), the install, or the source tree.
std::string DefaultFiguresFile() {
  for (const fs::path& p : {fs::path("scenarios/published/figures.yaml"),
                            fs::path(EPLB_INSTALL_DATADIR) / "eplb/published/figures.yaml",
                            fs::path(EPLB_SOURCE_DIR) / "scenarios/published/figures.yaml"}) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return "scenarios/published/figures.yaml";
}

}  // namespace

Status RunPublished(const PublishedArgs& a) {
  const std::string path = a.figures.empty() ? DefaultFiguresFile() : a.figures;
  auto figures = LoadPublishedFigures(path);
  if (!figures.ok()) return figures.status();
  const std::string dir = a.out.empty() ? "runs/published" : a.out;
  if (Status s = CheckOutputFolder(dir, kPublishedFolderKind); !s.ok()) return s;
  std::vector<FigureResult> results;
  for (const PublishedFigure& f : *figures) {
    auto r = EvaluateFigure(f);
    if (!r.ok()) return r.status();
    results.push_back(*r);
  }
  const std::string table = PublishedTable(results);
  const std::string json = PublishedJson(results).dump(2) + "\n";
  Status written = WritePublishedFolder(dir, table, json);
  if (!written.ok()) return written;
  std::FILE* human = HumanOutput(a.json);
  fmt::print(human, "{} published figures from {}\n{}", results.size(), path, table);
  fmt::print(human, "published folder {}\n", dir);
  if (a.json) fmt::print("{}", json);
  return Status::Ok();
}

void AddPublishedOptions(Command& sub, PublishedArgs& args) {
  sub.Flag("--published", &args.published,
           "Simulate every published figure of scenarios/published/figures.yaml and "
           "print simulated against published (no GPU needed)");
  sub.Option("--figures", &args.figures,
             "With --published: the figures file (default: the shipped one)");
}

void AddPublishedCommand(CommandLine& line) {
  auto args = std::make_shared<PublishedArgs>();
  Command& sub = line.Add(kValidateName, kValidateAbout);
  AddPublishedOptions(sub, *args);
  sub.Option("--out", &args->out, "Folder to write (default: runs/published)");
  sub.Flag("--json", &args->json, "Print published.json on stdout");
  sub.SetAction([args] {
    if (!args->published) {
      return Status::InvalidArgument(
          "give --published here; a device validation "
          "runs in eplb-validate");
    }
    return RunPublished(*args);
  });
}

}  // namespace eplb::cli
