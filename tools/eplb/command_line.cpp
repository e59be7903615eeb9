// The one file of each eplb executable that compiles CLI11 (command.h says why).
#include <algorithm>
#include <map>
#include <new>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "cli_util.h"
#include "command.h"
#include "eplb/base/csv.h"
#include "eplb/base/excerpt.h"
#include "eplb/io/run_folder.h"

namespace eplb::cli {

ValueCheck AtLeast(double min) {
  return {ValueCheck::Kind::kAtLeast, min, {}};
}
ValueCheck Positive() {
  return {ValueCheck::Kind::kAbove, 0, {}};
}
ValueCheck OneOf(std::vector<std::string> allowed) {
  return {ValueCheck::Kind::kOneOf, 0, std::move(allowed)};
}
ValueCheck NotEmpty() {
  return {ValueCheck::Kind::kNotEmpty, 0, {}};
}

OptionSpec& OptionSpec::Required() {
  required_ = true;
  return *this;
}
OptionSpec& OptionSpec::Check(ValueCheck check) {
  checks_.push_back(std::move(check));
  return *this;
}
OptionSpec& OptionSpec::ShowDefault() {
  show_default_ = true;
  return *this;
}
OptionSpec& OptionSpec::Excludes(const OptionSpec& other) {
  excludes_.push_back(&other);
  return *this;
}
OptionSpec& OptionSpec::SplitOn(char delimiter) {
  delimiter_ = delimiter;
  return *this;
}

Command::Command(std::string name, std::string about)
    : name_(std::move(name)), about_(std::move(about)) {}

OptionSpec& Command::Option(std::string names, OptionTarget target, std::string help) {
  OptionSpec& o = options_.emplace_back();
  o.names_ = std::move(names);
  o.help_ = std::move(help);
  o.target_ = target;
  return o;
}

OptionSpec& Command::Flag(std::string names, bool* target, std::string help) {
  OptionSpec& o = options_.emplace_back();
  o.names_ = std::move(names);
  o.help_ = std::move(help);
  o.target_ = target;
  return o;
}

OptionSpec& Command::Flag(std::string names, std::function<void(int64_t)> on_given,
                          std::string help) {
  OptionSpec& o = options_.emplace_back();
  o.names_ = std::move(names);
  o.help_ = std::move(help);
  o.target_ = std::move(on_given);
  return o;
}

Command& CommandLine::Add(std::string name, std::string about) {
  return commands_.emplace_back(std::move(name), std::move(about));
}

namespace {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
// C++20 deduces this from the braces itself; clang 14 (which clang-tidy parses with) needs it.
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

CLI::Validator NumberCheck(double min, bool strictly_above) {
  const std::string what = fmt::format("{} {}", strictly_above ? "above" : "at least", min);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double v = 0;
        if (!ParseCsvDouble(text, v)) return fmt::format("'{}' is not a number", text);
        if (v < min || (strictly_above && v <= min)) {
          return fmt::format("{} is too small; it must be {}", text, what);
        }
        return {};
      },
      "NUMBER " + std::string(strictly_above ? "> " : ">= ") + fmt::format("{}", min));
}

CLI::Validator ToValidator(const ValueCheck& check) {
  switch (check.kind) {
    case ValueCheck::Kind::kAtLeast:
      return NumberCheck(check.bound, false);
    case ValueCheck::Kind::kAbove:
      return NumberCheck(check.bound, true);
    case ValueCheck::Kind::kOneOf:
      return CLI::IsMember(check.allowed);
    case ValueCheck::Kind::kNotEmpty:
      return CLI::Validator(
          [](std::string& text) -> std::string {
            return text.empty() ? "the value is empty; give one, or leave the option out for "
                                  "its default"
                                : "";
          },
          "TEXT");
  }
  return {};
}

}  // namespace

int CommandLine::Run(int argc, char** argv) {
  CLI::App app{"eplb: expert-parallel load balancing for Mixture-of-Experts models", "eplb"};
  app.require_subcommand(1);
  app.set_version_flag("--version", ToolVersion());
  const Command* chosen = nullptr;
  for (const Command& command : commands_) {
    CLI::App* sub = app.add_subcommand(command.name_, command.about_);
    std::map<const OptionSpec*, CLI::Option*> added;
    for (const OptionSpec& spec : command.options_) {
      CLI::Option* option = std::visit(
          Overloaded{[&](const OptionTarget& target) {
                       return std::visit(
                           [&](auto* variable) {
                             return sub->add_option(spec.names_, *variable, spec.help_);
                           },
                           target);
                     },
                     [&](bool* flag) { return sub->add_flag(spec.names_, *flag, spec.help_); },
                     [&](const std::function<void(int64_t)>& on_given) {
                       return sub->add_flag_function(spec.names_, on_given, spec.help_);
                     }},
          spec.target_);
      if (spec.show_default_) option->capture_default_str();
      for (const ValueCheck& check : spec.checks_) option->check(ToValidator(check));
      if (spec.required_) option->required();
      if (spec.delimiter_ != '\0') option->delimiter(spec.delimiter_);
      for (const OptionSpec* other : spec.excludes_) option->excludes(added.at(other));
      added[&spec] = option;
    }
    sub->callback([&chosen, &command] { chosen = &command; });
  }
  // CLI11 would call an unknown word "an extra argument" or ask for a subcommand.
  if (argc >= 2 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const Command& command : commands_) names.push_back(command.name_);
    if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      fmt::print(stderr, "eplb: unknown command {}; the commands are: {} (eplb --help)\n",
                 QuoteInput(argv[1]), fmt::join(names, ", "));
      return kExitBadInput;
    }
  }
  // CLI11's own messages quote arguments whole: no control byte of them reaches the terminal.
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    return PrintableMessage(CLI::FailureMessage::simple(a, e));
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitBadInput;
  }
  if (chosen == nullptr || !chosen->action_) return kExitBadInput;
  // Expected failures are Statuses; this is the last guard, so that nothing ends in an abort
  // (memory running out despite the sizing checks, a library's exception).
  try {
    const Status done = chosen->action_();
    return done.ok() ? kExitOk : ReportError(chosen->name(), done);
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "eplb: error: out of memory; the run is larger than this machine allows\n");
  } catch (const std::exception& e) {
    fmt::print(stderr, "eplb: internal error: {}\n", e.what());
  }
  return kExitFailed;
}

int RunCommands(int argc, char** argv, std::span<const AddCommand> commands) {
  CommandLine line;
  for (AddCommand add : commands) add(line);
  return line.Run(argc, argv);
}

}  // namespace eplb::cli
