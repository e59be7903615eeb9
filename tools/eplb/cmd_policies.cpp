// eplb policies: every registered policy, what it does, and the options it reads.
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "eplb/policy/policy.h"

namespace eplb::cli {
namespace {

Status RunPolicies(bool json) {
  const std::vector<PolicyInfo> policies = RegisteredPolicies();
  if (json) {
    nlohmann::ordered_json doc = nlohmann::ordered_json::array();
    for (const PolicyInfo& p : policies) {
      nlohmann::ordered_json options = nlohmann::ordered_json::array();
      for (const std::string& name : p.options) {
        const PolicyOption& o = *FindPolicyOption(name);
        options.push_back({{"name", o.name},
                           {"default", o.DefaultText()},
                           {"scenario_field", o.scenario_field},
                           {"meaning", o.meaning}});
      }
      doc.push_back({{"name", p.name}, {"summary", p.summary}, {"options", options}});
    }
    fmt::print("{}\n", doc.dump(2));
    return Status::Ok();
  }
  for (const PolicyInfo& p : policies) {
    fmt::print("{:<18} {}\n", p.name, p.summary);
    if (!p.options.empty()) {
      fmt::print("    {:<20} {:<18} {:<32} {}\n", "option", "default", "scenario field", "meaning");
    }
    for (const std::string& name : p.options) {
      const PolicyOption& o = *FindPolicyOption(name);
      fmt::print("    {:<20} {:<18} {:<32} {}\n", o.name, o.DefaultText(), o.scenario_field,
                 o.meaning);
    }
  }
  fmt::print(
      "\nOptions are set with `eplb rebalance --option NAME=VALUE`, as keywords in Python's "
      "eplb.rebalance, and through the scenario field named in runs.\n");
  return Status::Ok();
}

}  // namespace

void AddPoliciesCommand(CommandLine& line) {
  auto json = std::make_shared<bool>(false);
  Command& sub =
      line.Add("policies", "List every rebalancing policy with its options and defaults");
  sub.Flag("--json", json.get(), "Print the list as JSON");
  sub.SetAction([json] { return RunPolicies(*json); });
}

}  // namespace eplb::cli
