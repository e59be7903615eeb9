// Helpers shared by the commands that simulate: reading the scenario argument and running one
// simulation into a run folder.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "eplb/run_output.h"
#include "eplb/scenario.h"
#include "eplb/status.h"

namespace eplb::cli {

// The scenario file at `path` (or the built-in default when empty) with `overrides` applied.
Result<Scenario> LoadScenarioArg(const std::string& path,
                                 const std::vector<std::string>& overrides);

// The error of a simulating command in a build without SimGrid.
Status SimulatorMissing();

// The positional SCENARIO and the repeatable --set every simulating command takes.
void AddScenarioOptions(CLI::App* command, std::string& scenario_path,
                        std::vector<std::string>& overrides);

// The summary lines of a finished run and where its folder is.
void PrintRunSummary(const RunResult& run, const std::string& dir);

// Splits "a,b,c".
std::vector<std::string> SplitList(const std::string& list);

#ifdef EPLB_HAVE_SIM
// Simulates `scenario` and writes its run folder at `dir`.
Status SimulateToFolder(const Scenario& scenario, const std::string& dir);
#endif

}  // namespace eplb::cli
