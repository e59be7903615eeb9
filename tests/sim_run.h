// A whole simulated run of a shipped scenario, for tests of what the simulator's clock shows.
// SimGrid allows one simulation per process: ctest runs each test in its own.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "eplb/engine/run_result.h"
#include "eplb/io/scenario_file.h"
#include "simulation.h"

namespace eplb::testing {

// scenarios/tiny.yaml with `overrides`, simulated.
inline RunResult SimulateTiny(const std::vector<std::string>& overrides) {
  auto scenario = LoadScenarioFile(std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml", overrides);
  EXPECT_TRUE(scenario.ok()) << scenario.status().message();
  auto run = sim::RunSimulation(*scenario);
  EXPECT_TRUE(run.ok()) << run.status().message();
  return std::move(run).value();
}

}  // namespace eplb::testing
