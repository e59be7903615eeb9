// A command line as data: each subcommand's options and flags, bound to the variables they set,
// with their checks and the action that runs once the line is parsed. command_line.cpp alone
// turns this into CLI11's parser and runs it.
//
// Why not CLI11 in every command file: CLI11 is header-only and defines its validators as
// objects in every file that includes it, which costs each such file ~10 s of compiling at -O3
// (measured: an empty main with CLI/CLI.hpp, 9.8 s). The command files describe their options
// here instead, and CLI11 is compiled once per executable.
//
// Not thread-safe; built and run on the main thread before any work starts.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "eplb/base/status.h"

namespace eplb::cli {

// What a parsed command does; returns the exit code.
// A command's work: OK, or the expected failure that the command line reports once, as
// "eplb <command>: error: <message>" with ExitCodeFor's exit code (cli_util.h).
using Action = std::function<Status()>;

// A check on an option's value, run by the parser. Its messages read as people write ranges
// ("--jobs: -1 is too small; it must be at least 0"), where CLI11's own ranges print the
// largest double.
struct ValueCheck {
  enum class Kind { kAtLeast, kAbove, kOneOf, kNotEmpty };
  Kind kind = Kind::kAtLeast;
  double bound = 0;                  // kAtLeast, kAbove
  std::vector<std::string> allowed;  // kOneOf
};
ValueCheck AtLeast(double min);
ValueCheck Positive();
ValueCheck OneOf(std::vector<std::string> allowed);
// A list option given as '' is a slip (an unset shell variable), not a wish for its default.
ValueCheck NotEmpty();

// The variable an option sets. A vector takes the option once per item (repeatable), or split
// at SplitOn's delimiter.
using OptionTarget = std::variant<std::string*, int*, int64_t*, double*, std::vector<std::string>*,
                                  std::vector<int>*>;

// One option or flag of a command; the setters return it, so that they chain.
class OptionSpec {
 public:
  OptionSpec& Required();
  OptionSpec& Check(ValueCheck check);
  // --help shows the variable's value at parse time (before parsing: its default).
  OptionSpec& ShowDefault();
  // Giving both this and `other` is an error ("--virtual excludes --nccl").
  OptionSpec& Excludes(const OptionSpec& other);
  OptionSpec& SplitOn(char delimiter);

 private:
  friend class Command;
  friend class CommandLine;
  // Names as CLI11 takes them: "--out", "-o,--out", or a word for a positional argument.
  std::string names_;
  std::string help_;
  // A value option's variable; or a flag's, which is set to true; or a function called with
  // how many times the flag was given.
  std::variant<OptionTarget, bool*, std::function<void(int64_t)>> target_;
  bool required_ = false;
  bool show_default_ = false;
  char delimiter_ = '\0';
  std::vector<ValueCheck> checks_;
  std::vector<const OptionSpec*> excludes_;
};

class Command {
 public:
  Command(std::string name, std::string about);

  OptionSpec& Option(std::string names, OptionTarget target, std::string help);
  OptionSpec& Flag(std::string names, bool* target, std::string help);
  OptionSpec& Flag(std::string names, std::function<void(int64_t count)> on_given,
                   std::string help);
  // Runs when this command was chosen and its line parsed; a failure is reported under this
  // command's name. A command without one (listed for --help, run elsewhere) exits with
  // kExitBadInput.
  void SetAction(Action action) { action_ = std::move(action); }

  const std::string& name() const { return name_; }

 private:
  friend class CommandLine;
  std::string name_;
  std::string about_;
  std::deque<OptionSpec> options_;  // a deque: Excludes keeps addresses
  Action action_;
};

// The subcommands of one executable.
class CommandLine {
 public:
  Command& Add(std::string name, std::string about);
  // Parses the line and runs the chosen command's action: the main() of every eplb executable
  // (eplb, eplb-sim, eplb-device, eplb-validate). Returns the exit code: the action's, or
  // kExitBadInput for a line that does not parse (the parser's message on stderr), 0 for
  // --help and --version.
  int Run(int argc, char** argv);

 private:
  std::deque<Command> commands_;
};

// Adds one subcommand to an executable's command line.
using AddCommand = void (*)(CommandLine& line);

// The command line of an executable with these commands, run: its main().
int RunCommands(int argc, char** argv, std::span<const AddCommand> commands);

}  // namespace eplb::cli
