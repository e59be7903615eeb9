#include "eplb/policy/external_policy.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "base/kept_program.h"
#include "eplb/base/excerpt.h"
#include "eplb/base/file_io.h"
#include "eplb/base/interrupt.h"

namespace eplb {
namespace {

// The registered user's program called `name`, or none.
std::optional<PolicyInfo> FindProgram(std::string_view name) {
  std::optional<PolicyInfo> p = FindPolicy(name);
  if (!p || p->placeholder || p->source != PolicySource::kProgram) return std::nullopt;
  return p;
}

double NowS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

constexpr char kRequestMagic[4] = {'E', 'P', 'L', 'B'};
constexpr char kReplyMagic[4] = {'E', 'P', 'L', 'R'};
constexpr char kGreetingMagic[4] = {'E', 'P', 'L', 'H'};
// A message longer than this is a stream of garbage more likely than something to show.
constexpr int32_t kMaxMessageBytes = 64 * 1024;

template <typename T>
void Append(std::vector<char>& out, const T& value) {
  const char* p = reinterpret_cast<const char*>(&value);
  out.insert(out.end(), p, p + sizeof(T));
}

// What a reply's bytes look like to a person: printable ASCII kept, the rest escaped.
std::string Printable(const char* data, size_t n) {
  std::string text;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(data[i]);
    if (c >= 0x20 && c < 0x7f) {
      text += static_cast<char>(c);
    } else {
      text += fmt::format("\\x{:02x}", c);
    }
  }
  return text;
}

}  // namespace

struct ExternalPolicy::Child {
  pid_t pid = -1;
  int fd = -1;
  bool reaped = false;
  int wait_status = 0;
  std::unique_ptr<ScopedChildProcess> registered;

  // Waits up to `grace_s` for the program to end, then has its keeper end it and everything it
  // started (base/kept_program.h).
  void Stop(double grace_s) {
    if (fd >= 0) ::close(fd);
    fd = -1;
    if (!WaitUpTo(grace_s)) {
      ::kill(pid, SIGTERM);
      // The keeper kills and reaps; a keeper that cannot (stopped, or the machine too busy) is
      // killed after a while, and what it kept with it as far as its groups reach.
      if (!WaitUpTo(5.0)) {
        ::kill(-pid, SIGKILL);
        while (::waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
        }
        reaped = true;
      }
    }
  }

  bool WaitUpTo(double seconds) {
    const double until = NowS() + seconds;
    while (!reaped) {
      const pid_t r = ::waitpid(pid, &wait_status, WNOHANG);
      if (r == pid || (r < 0 && errno != EINTR)) {
        reaped = true;
        break;
      }
      if (NowS() >= until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

  // How the program ended, once it has: "exited with status 3", "was killed by signal 11".
  std::string HowItEnded() {
    Stop(1.0);
    if (WIFEXITED(wait_status)) {
      const int code = WEXITSTATUS(wait_status);
      if (code == 127) return "could not be started (exit status 127: command not found?)";
      // The shell's status for a program a signal killed.
      if (code > 128 && code < 128 + 65) {
        return fmt::format("exited with status {} (killed by signal {}, {})", code, code - 128,
                           ::strsignal(code - 128));
      }
      return fmt::format("exited with status {}", code);
    }
    if (WIFSIGNALED(wait_status)) {
      const int sig = WTERMSIG(wait_status);
      return fmt::format("was killed by signal {} ({})", sig, ::strsignal(sig));
    }
    return "ended";
  }
};

Result<ExternalPolicyCommand> ParsePolicyCommand(std::string_view text, double timeout_s) {
  if (!(timeout_s > 0) || !std::isfinite(timeout_s)) {
    return Status::InvalidArgument(
        fmt::format("--policy-timeout is {}; it must be a positive number of seconds", timeout_s));
  }
  ExternalPolicyCommand c{std::string(kExternalPolicyName), std::string(text), timeout_s};
  const size_t eq = text.find('=');
  if (eq != std::string_view::npos && eq > 0 && eq + 1 < text.size() && text[eq + 1] != ' ') {
    const std::string_view name = text.substr(0, eq);
    const bool word = std::all_of(name.begin(), name.end(), [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.' ||
             ch == '+';
    });
    if (word) {
      EPLB_RETURN_IF_ERROR(CheckPolicyName(name, "--policy-command"));
      c.name = std::string(name);
      c.command = std::string(text.substr(eq + 1));
    }
  }
  if (c.command.find_first_not_of(" \t") == std::string::npos) {
    return Status::InvalidArgument(
        "--policy-command is empty; give the program to run, e.g. --policy-command "
        "'python3 my_policy.py' or 'mine=python3 my_policy.py'");
  }
  return c;
}

PolicyInfo ExternalPolicyInfo(const ExternalPolicyCommand& command) {
  PolicyInfo info{command.name.empty() ? std::string(kExternalPolicyName) : command.name,
                  "a user's program: " + command.command,
                  [command] { return std::make_unique<ExternalPolicy>(command); },
                  {},
                  /*honours_lost_ranks=*/true};  // its placements are checked for it
  info.source = PolicySource::kProgram;
  info.given = command.command;
  info.listed = info.name != kExternalPolicyName;
  return info;
}

Status RegisterExternalPolicy(const ExternalPolicyCommand& command) {
  return RegisterGivenPolicy(ExternalPolicyInfo(command), "--policy-command");
}

std::string ExternalPolicyCommandFor(std::string_view name) {
  const std::optional<PolicyInfo> p = FindProgram(name);
  return p ? p->given : std::string();
}

Status CheckExternalPolicyGiven(std::string_view name) {
  if (name != kExternalPolicyName || FindProgram(name)) return Status::Ok();
  return Status::InvalidArgument(
      "eplb.policy is 'external': a user's program, which a scenario or run folder never names "
      "(the command it ran is in scenario.yaml's comment, for the record); give it again: "
      "--policy-command 'CMD' on eplb run, compare or sweep, or policy= in Python");
}

ExternalPolicy::ExternalPolicy(ExternalPolicyCommand command)
    : name_(command.name.empty() ? std::string(kExternalPolicyName) : command.name),
      command_(std::move(command)) {}

ExternalPolicy::~ExternalPolicy() {
  if (child_) child_->Stop(1.0);
}

std::string ExternalPolicy::Describe() const {
  // Whole, however long: it is what the user typed, and what to look for.
  return fmt::format("the program '{}'",
                     Printable(command_.command.data(), command_.command.size()));
}

Status ExternalPolicy::Start() {
  if (command_.command.empty()) {
    EPLB_RETURN_IF_ERROR(CheckExternalPolicyGiven(name_));
    return Status::InvalidArgument(
        fmt::format("no command was given for the policy {}; give it with --policy-command",
                    QuoteInput(name_)));
  }
  int sv[2];
  // A socket rather than pipes: writes to a program that has gone fail with EPIPE
  // (MSG_NOSIGNAL) instead of raising SIGPIPE, and one descriptor serves both ways.
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return Status::IoError(
        fmt::format("cannot create the socket for {}: {}", Describe(), std::strerror(errno)));
  }
  // A simple command replaces the shell (exec), so that the program itself is the child: it
  // then dies with this process (PR_SET_PDEATHSIG, which a shell's children do not inherit),
  // and a crash reads as its signal. A command with the shell's syntax keeps the shell.
  // (An assignment before the program, A=1 prog, is the shell's syntax too.)
  const std::string& c = command_.command;
  const size_t first = c.find_first_not_of(" \t");
  const bool simple = c.find_first_of(";&|<>()`$\n{}*?[]~#'\"\\") == std::string::npos &&
                      c.find('=', first) >= c.find_first_of(" \t", first);
  const std::string shell_command = simple ? "exec " + command_.command : command_.command;
  // Under a keeper: what the program starts, setsid() or not, ends with it and with eplb.
  const pid_t pid = StartKeptProgram(shell_command.c_str(), sv[1], ::getpid());
  if (pid < 0) {
    const int err = errno;
    ::close(sv[0]);
    ::close(sv[1]);
    return Status::IoError(fmt::format("cannot start {}: {}", Describe(), std::strerror(err)));
  }
  ::close(sv[1]);
  child_ = std::make_unique<Child>();
  child_->pid = pid;
  child_->fd = sv[0];
  child_->registered = std::make_unique<ScopedChildProcess>(-pid);
  return Status::Ok();
}

namespace {

enum class Io { kOk, kTimeout, kClosed, kInterrupted };

// Waits for `events` on `fd` until `deadline_s`, a tenth of a second at a time so that an
// interruption is seen.
Io WaitFor(int fd, short events, double deadline_s) {
  while (true) {
    if (InterruptSignal() != 0) return Io::kInterrupted;
    const double left = deadline_s - NowS();
    if (left <= 0) return Io::kTimeout;
    pollfd p{fd, events, 0};
    const int ms = static_cast<int>(std::min(100.0, std::ceil(left * 1e3)));
    const int r = ::poll(&p, 1, ms);
    if (r < 0 && errno != EINTR) return Io::kClosed;
    if (r > 0) return Io::kOk;
  }
}

Io WriteAll(int fd, const char* data, size_t n, double deadline_s) {
  while (n > 0) {
    if (Io w = WaitFor(fd, POLLOUT, deadline_s); w != Io::kOk) return w;
    const ssize_t r = ::send(fd, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return Io::kClosed;
    }
    data += r;
    n -= static_cast<size_t>(r);
  }
  return Io::kOk;
}

// Reads exactly `n` bytes; `got` says how many came before a failure.
Io ReadAll(int fd, char* data, size_t n, double deadline_s, size_t& got) {
  got = 0;
  while (got < n) {
    if (Io w = WaitFor(fd, POLLIN, deadline_s); w != Io::kOk) return w;
    const ssize_t r = ::recv(fd, data + got, n - got, MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return Io::kClosed;
    }
    if (r == 0) return Io::kClosed;
    got += static_cast<size_t>(r);
  }
  return Io::kOk;
}

}  // namespace

Result<Placement> ExternalPolicy::Rebalance(const PolicyInput& input) {
  EPLB_RETURN_IF_ERROR(ValidatePolicyInput(input, /*honour_lost_ranks=*/true));
  if (!child_) EPLB_RETURN_IF_ERROR(Prepare());
  const Topology& t = input.topology;
  const int layers = static_cast<int>(input.load.rows());
  const int experts = static_cast<int>(input.load.cols());
  const int slots = t.num_slots();
  const int gpus = t.num_ranks();
  std::vector<char> request;
  request.reserve(64 + static_cast<size_t>(gpus) +
                  static_cast<size_t>(layers) * (experts * 8 + slots * 4));
  request.insert(request.end(), kRequestMagic, kRequestMagic + 4);
  for (const int32_t v : {kPolicyProtocolVersion, layers, experts, slots, gpus, t.nodes(),
                          t.slots_per_gpu(), input.num_groups, input.step, 0}) {
    Append(request, v);
  }
  for (int r = 0; r < gpus; ++r) request.push_back(IsLost(input, r) ? 1 : 0);
  const double* load = input.load.data();  // row-major: layers × experts
  const char* load_bytes = reinterpret_cast<const char*>(load);
  request.insert(request.end(), load_bytes,
                 load_bytes + sizeof(double) * static_cast<size_t>(layers) * experts);
  if (input.current != nullptr) {
    const auto& old = input.current->phy2log_flat();
    const char* p = reinterpret_cast<const char*>(old.data());
    request.insert(request.end(), p, p + sizeof(int32_t) * old.size());
  } else {
    // No placement in force: vLLM's initial one, as the run starts from.
    EPLB_ASSIGN_OR_RETURN(const Placement initial, Placement::Initial(layers, experts, slots));
    const auto& old = initial.phy2log_flat();
    const char* p = reinterpret_cast<const char*>(old.data());
    request.insert(request.end(), p, p + sizeof(int32_t) * old.size());
  }
  const double deadline = NowS() + command_.timeout_s;
  const Io written = WriteAll(child_->fd, request.data(), request.size(), deadline);
  if (written == Io::kInterrupted || InterruptSignal() != 0) return CheckInterrupt();
  if (written == Io::kTimeout) {
    child_->Stop(0);
    return Status::InvalidArgument(
        fmt::format("{} did not read its request within {} s (--policy-timeout); it was stopped",
                    Describe(), command_.timeout_s));
  }
  if (written == Io::kClosed) {
    return Status::InvalidArgument(
        fmt::format("{} {} before reading its request", Describe(), child_->HowItEnded()));
  }
  return ReadReply(input, deadline);
}

Status ExternalPolicy::ReadExactly(char* data, size_t n, std::string_view what, double deadline_s) {
  size_t got = 0;
  const Io r = ReadAll(child_->fd, data, n, deadline_s, got);
  if (r == Io::kOk) return Status::Ok();
  // SIGINT stops the program too (its group is registered): an interruption, not its fault.
  if (r == Io::kInterrupted || InterruptSignal() != 0) return CheckInterrupt();
  if (r == Io::kTimeout) {
    child_->Stop(0);
    return Status::InvalidArgument(fmt::format(
        "{} gave no reply within {} s (--policy-timeout; {} of the {} bytes of its {} came); "
        "it was stopped",
        Describe(), command_.timeout_s, got, n, what));
  }
  return Status::InvalidArgument(fmt::format("{} {} after {} of the {} bytes of its {}", Describe(),
                                             child_->HowItEnded(), got, n, what));
}

Status ExternalPolicy::Prepare() {
  if (child_) return Status::Ok();
  EPLB_RETURN_IF_ERROR(Start());
  return ReadGreeting();
}

Status ExternalPolicy::ReadGreeting() {
  char hello[8];
  EPLB_RETURN_IF_ERROR(ReadExactly(hello, sizeof(hello), "greeting (\"EPLH\", int32 version)",
                                   NowS() + command_.timeout_s));
  int32_t version = 0;
  std::memcpy(&version, hello + 4, 4);
  if (std::memcmp(hello, kGreetingMagic, 4) != 0 || version != kPolicyProtocolVersion) {
    return Status::InvalidArgument(fmt::format(
        "{} wrote \"{}\" where its greeting \"EPLH\" and protocol version {} belong: it must "
        "write only the protocol on stdout (print anything else on stderr; "
        "docs/policy_protocol.md)",
        Describe(), Printable(hello, sizeof(hello)), kPolicyProtocolVersion));
  }
  return Status::Ok();
}

Result<Placement> ExternalPolicy::ReadReply(const PolicyInput& input, double deadline_s) {
  const int layers = static_cast<int>(input.load.rows());
  const int experts = static_cast<int>(input.load.cols());
  const Topology& t = input.topology;
  const int slots = t.num_slots();
  char head[8];
  EPLB_RETURN_IF_ERROR(
      ReadExactly(head, sizeof(head), "reply's header (\"EPLR\", int32 status)", deadline_s));
  if (std::memcmp(head, kReplyMagic, 4) != 0) {
    return Status::InvalidArgument(fmt::format(
        "{} wrote \"{}\" where its reply's magic \"EPLR\" belongs: it must write only the "
        "protocol on stdout (print anything else on stderr; docs/policy_protocol.md)",
        Describe(), Printable(head, sizeof(head))));
  }
  int32_t status = 0;
  std::memcpy(&status, head + 4, 4);
  if (status == 1) {
    int32_t length = 0;
    EPLB_RETURN_IF_ERROR(
        ReadExactly(reinterpret_cast<char*>(&length), 4, "error message's length", deadline_s));
    if (length < 0 || length > kMaxMessageBytes) {
      return Status::InvalidArgument(
          fmt::format("{} reported an error of {} bytes; a message holds 0 to {} bytes", Describe(),
                      length, kMaxMessageBytes));
    }
    std::string message(static_cast<size_t>(length), '\0');
    EPLB_RETURN_IF_ERROR(ReadExactly(message.data(), message.size(), "error message", deadline_s));
    // The program's own text: one line, whatever it holds (base/excerpt.h).
    return Status::InvalidArgument(
        fmt::format("{} reported an error: {}", Describe(), PrintableLine(message)));
  }
  if (status != 0) {
    return Status::InvalidArgument(fmt::format(
        "{} replied with status {}; the status is 0 (a placement follows) or 1 (an error "
        "message follows)",
        Describe(), status));
  }
  int32_t shape[2];
  EPLB_RETURN_IF_ERROR(
      ReadExactly(reinterpret_cast<char*>(shape), 8, "placement's shape", deadline_s));
  if (shape[0] != layers || shape[1] != slots) {
    return Status::InvalidArgument(
        fmt::format("{} returned a placement of {} × {}; it must be layers × slots = {} × {} "
                    "(phy2log[layer][slot], int32)",
                    Describe(), shape[0], shape[1], layers, slots));
  }
  std::vector<int32_t> phy2log(static_cast<size_t>(layers) * slots);
  EPLB_RETURN_IF_ERROR(ReadExactly(reinterpret_cast<char*>(phy2log.data()),
                                   phy2log.size() * sizeof(int32_t), "placement", deadline_s));
  // Lost GPUs first: an expert left only there would otherwise read as merely unplaced.
  const int per_gpu = t.slots_per_gpu();
  for (const int rank : input.lost_ranks) {
    for (int l = 0; l < layers; ++l) {
      for (int s = rank * per_gpu; s < (rank + 1) * per_gpu; ++s) {
        const int32_t e = phy2log[static_cast<size_t>(l) * slots + s];
        if (e != kEmptySlot) {
          return Status::InvalidArgument(fmt::format(
              "{} returned a placement with expert {} in slot {} of layer {}, on GPU {}, which "
              "is lost: a lost GPU's slots must be empty (-1)",
              Describe(), e, s, l, rank));
        }
      }
    }
  }
  auto placement = Placement::Create(experts, slots, std::move(phy2log));
  if (!placement.ok()) {
    return placement.status().WithContext(
        fmt::format("{} returned a placement that is not valid: ", Describe()));
  }
  return placement;
}

}  // namespace eplb
