// The command line against hostile input and interruption: every kind of bad input is a clear
// error, and a kill or Ctrl-C at any instant leaves the old output or the new one whole, never a
// half-written folder, a lost user file or an orphaned child.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <random>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "cli_fixture.h"
#include "eplb/base/excerpt.h"
#include "eplb/base/file_io.h"
#include "eplb/io/run_folder.h"

extern char** environ;

namespace eplb {
namespace {

using std::chrono::milliseconds;

TEST_F(CliTest, UnknownCommandsAndBadNumbersReadAsPeopleWriteThem) {
  ExpectErrors({
      {"unknown command", "bogus",
       "eplb: unknown command 'bogus'; the commands are: rebalance, "
       "plan, policies, a2a, run, compare, sweep, device-run, validate"},
      {"negative count", "a2a --tokens -1", "--tokens: -1 is too small; it must be above 0"},
      {"a2a on one GPU", "a2a --set cluster.nodes=1 --set cluster.gpus_per_node=1",
       "the cluster has 1 GPU; an all-to-all needs at least 2"},
  });
  // Byte totals are bounded where they start: an expert of 2^63-1 bytes printed negative sums.
  const std::string placement = Write("p.json", "{\"phy2log\": [[0, 1, 2, 3]]}");
  const std::string moved = Write("q.json", "{\"phy2log\": [[1, 0, 3, 2]]}");
  ExpectErrors({{"huge expert",
                 "plan --old " + placement + " --new " + moved +
                     " --gpus 2 --nodes 2 --expert-bytes 9223372036854775807",
                 "expert bytes is 9223372036854775807; it must be within 1..1099511627776 (1 "
                 "TiB)"}});
#ifdef EPLB_HAVE_SIM
  // Without the simulator `compare` says so before it reads its options.
  ExpectErrors({{"negative jobs", "compare --jobs -1", "-1 is too small; it must be at least 0"}});
#endif
}

TEST_F(CliTest, HostileInputFilesAreErrorsNamingTheFile) {
  const std::string deep = Write("deep.json", std::string(100000, '[') + std::string(100000, ']'));
  const std::string huge = Write("huge.json", "[[1e400, 1]]");
  const std::string big_load = Write("big.csv", "1,1e300\n");
  ExpectErrors({
      {"device", "rebalance --load /dev/zero --replicas 2 --gpus 1",
       "/dev/zero is a character device; expected a regular file"},
      {"folder", "rebalance --load " + dir_.string() + " --replicas 2 --gpus 1",
       dir_.string() + " is a folder with neither TensorRT-LLM's meta_info.json nor .pt dumps"},
      {"deep JSON", "rebalance --load " + deep + " --replicas 2 --gpus 1",
       "deep.json:1:65: not valid here: arrays and objects nest more than 64 deep"},
      {"number beyond a double", "rebalance --load " + huge + " --replicas 2 --gpus 1",
       "number overflow"},
      {"load beyond the cap", "rebalance --load " + big_load + " --replicas 2 --gpus 1",
       "loads are at most 1e+15 tokens"},
  });
}

// A secret given where a scenario, a figures file, a load or a placement belongs is refused by
// its name, unread, and no error quotes a line of it.
TEST_F(CliTest, AFileOfAnotherKindIsRefusedUnreadAndNeverQuoted) {
  const std::string line = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW";
  const std::string secret =
      "-----BEGIN OPENSSH PRIVATE KEY-----\n" + line + "\n-----END OPENSSH PRIVATE KEY-----\n";
  const std::string key = Write("id_ed25519", secret);
  const std::string key_csv = Write("key.csv", secret);
  const std::string figures = Write(
      "figures.yaml", "figures:\n  - id: a\n    figure: x\n    source: y\n    scenario: " + key +
                          "\n    measure: dispatch_gbps\n    tokens: 4096\n"
                          "    mode: normal\n    unit: GB/s\n    published: 1\n");
  const std::vector<ErrorCase> cases = {
      {"load", "rebalance --load " + key + " --replicas 2 --gpus 1",
       key + ": expected a load, a file named *.csv, *.txt, *.json, *.pt or *.pth; this one has "
             "no extension, so eplb does not read it"},
      {"load named .csv", "rebalance --load " + key_csv + " --replicas 2 --gpus 1",
       key_csv + ":2: field 1 is not a number (not quoted: no row of numbers came before)"},
      {"placement", "plan --old " + key + " --new " + key + " --gpus 1",
       "expected a placement, a file named *.json, *.yaml or *.yml"},
      {"figures file", "validate --published --figures " + key,
       "expected a figures file, a file named *.yaml or *.yml"},
  };
  ExpectErrors(cases);
  for (const auto& c : cases) {
    const CliRun r = Eplb(c.args);
    EXPECT_EQ(r.err.find("BEGIN OPENSSH"), std::string::npos) << c.name << ": " << r.err;
    EXPECT_EQ(r.err.find(line), std::string::npos) << c.name << ": " << r.err;
  }
#ifdef EPLB_HAVE_SIM
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  ExpectErrors({
      {"figure's scenario", "validate --published --figures " + figures,
       "expected a scenario, a file named *.yaml or *.yml"},
      {"scenario", "run " + key, "expected a scenario, a file named *.yaml or *.yml"},
      {"trace", "run " + tiny + " --set workload.kind=trace --set workload.trace=" + key,
       "expected a load, a file named"},
  });
  const CliRun passwd = Eplb("validate --published --figures " + figures);
  EXPECT_EQ(passwd.err.find("BEGIN"), std::string::npos) << passwd.err;
#endif
}

// The one rule for quoting input (base/excerpt.h), through every reader: at most 32 bytes,
// printable; nothing of a file not yet recognised as its kind; and a symbolic link judged by the
// file it leads to. The secret is never echoed, whether linked or copied under a right name.
TEST_F(CliTest, ASecretIsNeverEchoedThroughALinkOrARightName) {
  const std::string shadow = Write("shadow",
                                   "root:$6$Zq8sAlt$Hh4shV4lu3S3cr3tXYZ:19000:0:99999:7:::\n"
                                   "daemon:*:19000:0:99999:7:::\n");
  const std::string env =
      Write(".env", "DB_PASSWORD=hunter2-Sup3rS3cret\nAPI_KEY=sk-live-abcdef\nDEBUG=1\n");
  const std::vector<std::string> secrets = {"hunter2", "Sup3rS3cret", "sk-live", "Hh4shV4lu3",
                                            "root:",   "DB_PASSWORD", "API_KEY"};
  const auto link = [&](const std::string& target, const std::string& name) {
    fs::create_symlink(target, dir_ / name);
    return (dir_ / name).string();
  };
  const auto copy = [&](const std::string& from, const std::string& name) {
    fs::copy_file(from, dir_ / name);
    return (dir_ / name).string();
  };
  const std::string real_shadow = fs::canonical(shadow).string();
  const std::string real_env = fs::canonical(env).string();
  const std::string x_yaml = link(shadow, "x.yaml");
  const std::string chain = link(x_yaml, "chain.yaml");  // a link to a link to the secret
  const std::string copied = copy(shadow, "copied.yaml");
  const std::string figures = Write(
      "figures.yaml", "figures:\n  - id: a\n    figure: x\n    source: y\n    scenario: " + x_yaml +
                          "\n    measure: dispatch_gbps\n    tokens: 4096\n"
                          "    mode: normal\n    unit: GB/s\n    published: 1\n");
  const std::string load = " --replicas 2 --gpus 1";
  const std::string linked_as =
      "; expected a load, a file named *.csv, *.txt, *.json, *.pt or "
      "*.pth, and the file it links to has no extension";
  const std::string unread = "not a number (not quoted: no row of numbers came before)";
  const std::string k300(300, 'k');
  const std::vector<ErrorCase> cases = {
      {"scenario linked as .yaml", "a2a " + x_yaml,
       x_yaml + ": a symbolic link to " + real_shadow +
           "; expected a scenario, a file named *.yaml or *.yml, and the file it links to has no "
           "extension, so eplb does not read it"},
      {"link to a link", "a2a " + chain, chain + ": a symbolic link to " + real_shadow + ";"},
      {"figures' scenario: a link", "validate --published --figures " + figures,
       x_yaml + ": a symbolic link to " + real_shadow + "; expected a scenario"},
      {"shadow copied as .yaml", "a2a " + copied,
       copied + ":1:1: not a scenario: none of its top-level fields is one of name, model, "
                "cluster, compute, workload, eplb, migration, faults, run; eplb quotes nothing"},
      {".env linked as .csv", "rebalance --load " + link(env, "creds.csv") + load,
       "creds.csv: a symbolic link to " + real_env + linked_as},
      {".env linked as .json", "rebalance --load " + link(env, "creds.json") + load,
       "creds.json: a symbolic link to " + real_env + linked_as},
      {".env linked as .txt", "rebalance --load " + link(env, "creds.txt") + load,
       "creds.txt: a symbolic link to " + real_env + linked_as},
      {".env copied as .csv", "rebalance --load " + copy(env, "env.csv") + load,
       "env.csv:2: field 1 is " + unread},
      {".env copied as .txt", "rebalance --load " + copy(env, "env.txt") + load,
       "env.txt:2: field 1 is " + unread},
      {".env copied as .json", "rebalance --load " + copy(env, "env.json") + load,
       "env.json:2: field 1 is " + unread},
      {"JSON secret as a load",
       "rebalance --load " + Write("s.json", R"({"load": ["DB_PASSWORD=hunter2"]})") + load,
       "s.json: load[0] is a JSON string (not quoted: no layer of numbers came before it)"},
      {"broken JSON secret as a load",
       "rebalance --load " + Write("b.json", R"({"DB_PASSWORD": hunter2})") + load,
       "b.json:1:17: not valid JSON: syntax error while parsing value - invalid literal"},
      {".env as a placement", "plan --old " + copy(env, "p.json") + " --new " + env + " --gpus 1",
       "p.json:1:1: not valid JSON: syntax error while parsing value - invalid literal"},
      {"JSON secret as a placement",
       "plan --old " + Write("q.json", R"({"DB_PASSWORD": "hunter2"})") + " --gpus 1 --new x",
       "q.json: expected a JSON object with key 'phy2log' or 'physical_to_logical_map'"},
      {"shadow as a TensorRT-LLM placement",
       "plan --old " + copy(shadow, "trt.yaml") + " --gpus 1 --new x",
       "trt.yaml: expected TensorRT-LLM's moe_load_balancer.yaml"},
      {"a key twice in an unrecognised file",
       "a2a " + Write("dup.yaml", "DB_PASSWORD: hunter2\nDB_PASSWORD: hunter3\n"),
       "dup.yaml:2:1: a key is given twice (also at line 1)"},
      {"300-byte unknown key", "a2a " + Write("long.yaml", "model: {layers: 2}\n" + k300 + ": 1\n"),
       "long.yaml:2:1: unknown field '" + k300.substr(0, 32) + "...'; valid fields here"},
      {"terminal escapes in a key",
       "a2a " + Write("esc.yaml", "model:\n  \"\\e]0;pwned\\a\\e[2J\": 1\n"),
       "esc.yaml:2:3: unknown field 'model.\\x1b]0;pwned\\x07\\x1b[2J'; valid fields here"},
      {"terminal escapes in a key twice",
       "a2a " + Write("esc2.yaml", "run: {}\n\"\\e[2J\": 1\n\"\\e[2J\": 2\n"),
       "esc2.yaml:3:1: '\\x1b[2J' is given twice (also at line 2)"},
      {"terminal escapes in a value",
       "a2a " + Write("esc3.yaml", "compute: {model: \"\\e[2Jroofline\"}\n"),
       "compute.model is '\\x1b[2Jroofline'; valid values: simple, roofline"},
      {"terminal escapes in a figures file",
       "validate --published --figures " +
           Write("fesc.yaml", "figures:\n  - id: a\n    \"\\e]0;pwned\\a\": 1\n"),
       "unknown field 'figures[0].\\x1b]0;pwned\\x07'"},
  };
  ExpectErrors(cases);
  for (const auto& c : cases) {
    const CliRun r = Eplb(c.args);
    for (const std::string& secret : secrets) {
      EXPECT_EQ(r.err.find(secret), std::string::npos) << c.name << ": " << r.err;
    }
    EXPECT_EQ(r.err.find_first_of(std::string("\x1b\x07", 2)), std::string::npos)
        << c.name << ": " << r.err;
    EXPECT_EQ(r.err.find(k300.substr(0, 33)), std::string::npos) << c.name << ": " << r.err;
  }
#ifdef EPLB_HAVE_SIM
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  const std::string trace = " --set workload.kind=trace --set workload.trace=";
  const std::vector<ErrorCase> sim_cases = {
      {"run: a link", "run " + x_yaml, x_yaml + ": a symbolic link to " + real_shadow},
      {"trace: a link", "run " + tiny + trace + (dir_ / "creds.csv").string(),
       "creds.csv: a symbolic link to " + real_env + linked_as},
      {"trace: a copy", "run " + tiny + trace + (dir_ / "env.csv").string(),
       "env.csv:2: field 1 is " + unread},
  };
  ExpectErrors(sim_cases);
  for (const auto& c : sim_cases) {
    const CliRun r = Eplb(c.args);
    for (const std::string& secret : secrets) {
      EXPECT_EQ(r.err.find(secret), std::string::npos) << c.name << ": " << r.err;
    }
  }
#endif
}

// A link whose file is of the kind is read as that file: the check refuses wrong files, not
// links.
TEST_F(CliTest, ALinkToAFileOfItsKindIsRead) {
  const std::string load = ReadmeLoad();
  fs::create_symlink(load, dir_ / "linked.csv");
  const CliRun r =
      Eplb("rebalance --load " + (dir_ / "linked.csv").string() + " --replicas 16 --gpus 4");
  EXPECT_EQ(r.code, 0) << r.err;
  // A link named otherwise than its file is refused, as a file so named would be.
  fs::create_symlink(load, dir_ / "linked");
  ExpectErrors({{"link without the kind's name",
                 "rebalance --load " + (dir_ / "linked").string() + " --replicas 2 --gpus 1",
                 "linked: expected a load, a file named *.csv, *.txt, *.json, *.pt or *.pth; this "
                 "one has no extension"}});
}

// Arguments reach stderr escaped too: eplb's messages, CLI11's and the unknown command's.
TEST_F(CliTest, AnArgumentsTerminalEscapesNeverReachTheTerminal) {
  const std::string esc = "\x1b]0;pwned\x07\x1b[2J";
  const std::vector<ErrorCase> cases = {
      {"unknown command", "'" + esc + "'", "unknown command '\\x1b]0;pwned\\x07\\x1b[2J'"},
      {"CLI11's number", "a2a --tokens '" + esc + "'", "--tokens: '\\x1b]0;pwned"},
      {"CLI11's unknown option", "a2a '--bogus" + esc + "'", "--bogus\\x1b]0;pwned\\x07"},
      {"eplb's own check", "a2a --mode '" + esc + "'", "--mode is '\\x1b]0;pwned\\x07"},
      {"a --set", "a2a --set '" + esc + "'", "--set '\\x1b]0;pwned\\x07\\x1b[2J'"},
  };
  ExpectErrors(cases);
  for (const auto& c : cases) {
    const CliRun r = Eplb(c.args);
    EXPECT_EQ(r.err.find_first_of(std::string("\x1b\x07", 2)), std::string::npos)
        << c.name << ": " << r.err;
  }
}

// QuoteInput, the one helper every reader quotes input through.
TEST(QuoteInput, QuotesAtMost32PrintableBytes) {
  const struct {
    std::string text, quoted;
  } cases[] = {
      {"expertz", "'expertz'"},
      {"", "''"},
      {std::string(32, 'k'), "'" + std::string(32, 'k') + "'"},
      {std::string(300, 'k'), "'" + std::string(32, 'k') + "...'"},
      {"\x1b]0;pwned\x07\x1b[2J", "'\\x1b]0;pwned\\x07\\x1b[2J'"},
      {"caf\xc3\xa9", "'caf\\xc3\\xa9'"},
      {std::string("a\0b", 3), "'a\\x00b'"},
      {"tab\there\r\n", "'tab\\x09here\\x0d\\x0a'"},
  };
  for (const auto& c : cases) EXPECT_EQ(QuoteInput(c.text), c.quoted) << c.text;
  // The command line's last guard keeps eplb's own UTF-8 and line feeds, escapes the rest.
  EXPECT_EQ(PrintableMessage("2 \xc3\x97 3\x1b[2J\nnext"), "2 \xc3\x97 3\\x1b[2J\nnext");
}

// A scenario's name becomes runs/NAME when no --out is given: it is one safe path component.
TEST_F(CliTest, AScenarioNameNeverEscapesTheRunsFolder) {
  const fs::path cwd = dir_ / "cwd";
  fs::create_directories(cwd);
  for (const std::string name : {"../../escaped", "/tmp/eplb-escaped-abs", ".hidden", "a/b"}) {
    const std::string scenario =
        Write("named.yaml", "name: " + name + "\nmodel: {layers: 2, experts: 8}\n");
    const CliRun r = Eplb("run " + scenario + " --set run.steps=10", "cd " + cwd.string() + " &&");
#ifdef EPLB_HAVE_SIM
    EXPECT_EQ(r.code, 2) << name << ": " << r.err;
    EXPECT_NE(r.err.find("named.yaml:1:7: name is '" + name +
                         "'; it names the default output folder runs/NAME"),
              std::string::npos)
        << r.err;
#else
    EXPECT_NE(r.code, 0);
#endif
  }
  EXPECT_FALSE(fs::exists(dir_ / "escaped"));
  EXPECT_FALSE(fs::exists("/tmp/eplb-escaped-abs"));
  EXPECT_FALSE(fs::exists(cwd / "runs"));
}

#ifdef EPLB_HAVE_SIM

// compare and sweep need the simulator to get as far as their lists.
TEST_F(CliTest, AListOptionNamingAnItemTwiceIsRefused) {
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  ExpectErrors({
      {"policy twice", "compare " + tiny + " --policies deepseek,deepseek",
       "--policies names 'deepseek' twice"},
      {"key varied twice", "sweep " + tiny + " --vary cluster.nodes=1,2 --vary cluster.nodes=4",
       "--vary names 'cluster.nodes' twice"},
      {"value twice", "sweep " + tiny + " --vary cluster.nodes=1,1",
       "--vary cluster.nodes names '1' twice"},
      {"too many points",
       "sweep " + tiny + " --vary run.seed=1,2,3,4,5,6,7,8,9,10 --vary run.steps=" +
           "1,2,3,4,5,6,7,8,9,10 --vary workload.sigma=1,2,3,4,5,6,7,8,9,10 --vary "
           "eplb.window_size=1,2,3,4,5,6,7,8,9,10,11",
       "make 11000 points; a sweep runs at most 10000"},
  });
}

// Starts eplb with `args` in the background; stdout and stderr go to files in the test folder.
pid_t Spawn(const std::vector<std::string>& args, const fs::path& dir) {
  std::vector<std::string> all = {EPLB_BINARY};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, (dir / "bg.out").c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, (dir / "bg.err").c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

// The exit status of `pid`, or -1 if it has not ended within `limit` (a hang guard, not a
// speed requirement: the test then kills it and fails).
int WaitFor(pid_t pid, milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

// Entries of `dir` whose name contains `part`.
std::vector<std::string> Named(const fs::path& dir, const std::string& part) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().find(part) != std::string::npos) {
      out.push_back(e.path().filename().string());
    }
  }
  return out;
}

// The children of `parent`, from /proc.
std::set<pid_t> ChildrenOf(pid_t parent) {
  std::set<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = testing::ReadFile(e.path() / "stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    int ppid = 0;
    char state = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == parent &&
        state != 'Z') {
      out.insert(std::stoi(name));
    }
  }
  return out;
}

// The children of `parent` once there are `count` of them at work (or fewer after 10 s).
std::set<pid_t> WaitForChildren(pid_t parent, size_t count) {
  std::set<pid_t> children;
  for (int i = 0; i < 2000 && children.size() < count; ++i) {
    std::this_thread::sleep_for(milliseconds(5));
    children = ChildrenOf(parent);
  }
  return children;
}

bool Alive(pid_t pid) {
  const std::string stat = testing::ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  return close != std::string::npos && stat[close + 2] != 'Z';
}

TEST_F(CliTest, AFolderHoldingFilesEplbDidNotWriteIsNeverReplaced) {
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  const std::string out = (dir_ / "run").string();
  ASSERT_EQ(Eplb("run " + tiny + " --set run.steps=50 --out " + out).code, 0);
  // Each case changes the finished run folder as a user might; the next run refuses to replace
  // it, naming what is not eplb's, and leaves it as it is.
  struct Case {
    const char* name;
    std::function<void()> change;
    std::function<bool()> kept;
    std::function<void()> undo;
    const char* message;
  };
  const fs::path run = dir_ / "run";
  const std::string metrics = testing::ReadFile(run / "metrics.csv");
  const std::vector<Case> cases = {
      {"a file", [&] { Write("run/my-notes.txt", "mine"); },
       [&] { return testing::ReadFile(run / "my-notes.txt") == "mine"; },
       [&] { fs::remove(run / "my-notes.txt"); },
       "holds 1 entry eplb did not write (my-notes.txt)"},
      {"an empty folder", [&] { fs::create_directory(run / "mine"); },
       [&] { return fs::is_directory(run / "mine"); }, [&] { fs::remove(run / "mine"); },
       "holds 1 entry eplb did not write (mine/)"},
      {"a link", [&] { fs::create_symlink("/nonexistent", run / "link"); },
       [&] { return fs::is_symlink(run / "link"); }, [&] { fs::remove(run / "link"); },
       "holds 1 entry eplb did not write (link)"},
      {"an edit of the same size",
       [&] {
         std::string edited = metrics;
         edited[edited.size() - 2] = edited[edited.size() - 2] == '1' ? '2' : '1';
         Write("run/metrics.csv", edited);
       },
       [&] { return testing::ReadFile(run / "metrics.csv") != metrics; },
       [&] { Write("run/metrics.csv", metrics); }, "metrics.csv has checksum"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    c.change();
    const CliRun again = Eplb("run " + tiny + " --set run.steps=60 --out " + out);
    EXPECT_EQ(again.code, 2);
    EXPECT_NE(again.err.find(c.message), std::string::npos) << again.err;
    // Refused before simulating: no progress was reported.
    EXPECT_EQ(again.err.find("step "), std::string::npos) << again.err;
    EXPECT_TRUE(c.kept());
    c.undo();
  }
  // A run folder is not a comparison folder.
  const CliRun other =
      Eplb("compare " + tiny + " --set run.steps=10 --policies static --out " + out);
  EXPECT_EQ(other.code, 2);
  EXPECT_NE(other.err.find("is an eplb run folder, not a comparison folder"), std::string::npos)
      << other.err;
  auto folder = ReadRunFolder(out);
  ASSERT_TRUE(folder.ok()) << folder.status().message();
  EXPECT_EQ(folder->summary.steps, 50);
}

// A disk that fills while the folder is written (here a file-size limit: the same failed
// write): exit 1, since the machine failed and not the input, and the old folder is untouched.
TEST_F(CliTest, AFullDiskExitsOneAndLeavesTheOldFolderWhole) {
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  const std::string out = (dir_ / "run").string();
  ASSERT_EQ(Eplb("run " + tiny + " --set run.steps=50 --no-trace --out " + out).code, 0);
  const CliRun full = Eplb("run " + tiny + " --set run.steps=300 --no-trace --out " + out,
                           "trap '' XFSZ; ulimit -f 4;");
  EXPECT_EQ(full.code, 1);
  EXPECT_NE(full.err.find("File too large while writing " + out + ".partial-"), std::string::npos)
      << full.err;
  EXPECT_NE(full.err.find("; nothing was replaced: " + out + " is as it was"), std::string::npos)
      << full.err;
  auto folder = ReadRunFolder(out);
  ASSERT_TRUE(folder.ok()) << folder.status().message();
  EXPECT_EQ(folder->summary.steps, 50);
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename().string().find(".partial-"), std::string::npos);
  }
}

TEST_F(CliTest, AnOutThatCannotBeWrittenIsRefusedBeforeTheWork) {
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  Write("a-file", "mine");
  fs::create_symlink(dir_ / "nowhere", dir_ / "dangling");
  fs::create_directory(dir_ / "target");
  fs::create_symlink(dir_ / "target", dir_ / "link");
  fs::create_directory(dir_ / "foreign");
  Write("foreign/notes.txt", "mine");
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"a-file", "a-file exists and is not a folder"},
      {"dangling", "dangling is a symbolic link to nothing"},
      {"link", "link is a symbolic link; eplb writes its folder at --out itself"},
      {"foreign", "foreign exists and is not a finished eplb folder"},
  };
  for (const auto& [name, message] : cases) {
    for (const char* command : {"run", "validate --published"}) {
      SCOPED_TRACE(std::string(name) + " " + command);
      const std::string args = std::string(command) == "run" ? command + (" " + tiny) : command;
      const CliRun r = Eplb(args + " --out " + (dir_ / name).string());
      EXPECT_EQ(r.code, 2);
      EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
      EXPECT_EQ(r.err.find("step "), std::string::npos) << r.err;  // before any simulation
    }
  }
  EXPECT_EQ(testing::ReadFile(dir_ / "a-file"), "mine");
  EXPECT_EQ(testing::ReadFile(dir_ / "foreign/notes.txt"), "mine");
  EXPECT_TRUE(fs::is_symlink(dir_ / "dangling"));
  EXPECT_TRUE(fs::is_symlink(dir_ / "link"));
  EXPECT_TRUE(fs::is_empty(dir_ / "target"));
}

TEST_F(CliTest, StalePartialFoldersOfDeadProcessesAreRemovedWhenEplbs) {
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  std::string name(host);
  std::replace(name.begin(), name.end(), '-', '_');
  std::replace(name.begin(), name.end(), '/', '_');
  const fs::path stale = dir_ / ("run.partial-" + name + "-" + std::to_string(dead));
  fs::create_directories(stale);
  Write(stale.filename().string() + "/.eplb-partial",
        "eplb partial folder\nkind\trun\nhost\t" + name + "\npid\t" + std::to_string(dead) + "\n");
  Write(stale.filename().string() + "/metrics.csv", "step\n");
  // Named as a dead process's leftover, but not eplb's: the user's files, named and kept.
  const pid_t dead_too = fork();
  if (dead_too == 0) _exit(0);
  waitpid(dead_too, nullptr, 0);
  const fs::path users = dir_ / ("run.partial-" + name + "-" + std::to_string(dead_too));
  fs::create_directories(users);
  Write(users.filename().string() + "/thesis.tex", "mine");
  const fs::path live = dir_ / ("run.partial-" + name + "-" + std::to_string(getpid()));  // alive
  const fs::path elsewhere = dir_ / ("run.partial-othermachine-" + std::to_string(dead));
  fs::create_directories(live);
  fs::create_directories(elsewhere);  // another machine's, on a shared file system: kept
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  const auto result = Eplb("run " + tiny + " --set run.steps=10 --out " + (dir_ / "run").string());
  ASSERT_EQ(result.code, 0) << result.err;
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_EQ(testing::ReadFile(users / "thesis.tex"), "mine");
  EXPECT_NE(result.err.find("kept " + users.string()), std::string::npos) << result.err;
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(elsewhere));
}

// SIGKILL at random instants while `run` replaces a folder: afterwards the folder is the old run
// or the new one, whole (the manifest and every check of the reader pass), a file beside it is
// untouched, and the next run cleans up whatever the killed one left.
TEST_F(CliTest, AKillAtAnyInstantLeavesTheOldFolderOrTheNewOneWhole) {
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  const std::string out = (dir_ / "run").string();
  ASSERT_EQ(Eplb("run " + tiny + " --set run.steps=100 --out " + out).code, 0);
  Write("beside.txt", "mine");
  std::mt19937 rng(12345);
  std::set<int64_t> seen;
  for (int i = 0; i < 24; ++i) {
    const int steps = i % 2 == 0 ? 20000 : 100;
    const pid_t pid =
        Spawn({"run", tiny, "--set", "run.steps=" + std::to_string(steps), "--out", out}, dir_);
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 350000));
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    auto folder = ReadRunFolder(out);
    ASSERT_TRUE(folder.ok()) << "after kill " << i << ": " << folder.status().message();
    EXPECT_TRUE(folder->summary.steps == 100 || folder->summary.steps == 20000)
        << folder->summary.steps;
    seen.insert(folder->summary.steps);
  }
  EXPECT_EQ(testing::ReadFile(dir_ / "beside.txt"), "mine");
  ASSERT_EQ(Eplb("run " + tiny + " --set run.steps=100 --out " + out).code, 0);
  EXPECT_TRUE(Named(dir_, ".partial-").empty());
}

// Ctrl-C (SIGINT) on compare: the children stop, the partial folder goes, the exit status is 130,
// and nothing the command had not finished is left. SIGTERM on run: 143, the same.
TEST_F(CliTest, InterruptedCommandsStopTheirChildrenAndLeaveNothing) {
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  const std::string out = (dir_ / "cmp").string();
  const pid_t pid = Spawn({"compare", tiny, "--set", "run.steps=1000000", "--policies",
                           "static,deepseek", "--jobs", "2", "--out", out},
                          dir_);
  const std::set<pid_t> children = WaitForChildren(pid, 2);
  ASSERT_EQ(children.size(), 2u);
  kill(pid, SIGINT);
  EXPECT_EQ(WaitFor(pid, milliseconds(20000)), 130);
  const std::string err = testing::ReadFile(dir_ / "bg.err");
  EXPECT_NE(err.find("interrupted by SIGINT"), std::string::npos) << err;
  for (pid_t child : children) EXPECT_FALSE(Alive(child)) << child;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(Named(dir_, ".partial-").empty());

  const std::string run_out = (dir_ / "run").string();
  const pid_t run = Spawn({"run", tiny, "--set", "run.steps=1000000", "--out", run_out}, dir_);
  std::this_thread::sleep_for(milliseconds(300));
  kill(run, SIGTERM);
  EXPECT_EQ(WaitFor(run, milliseconds(20000)), 143);
  EXPECT_FALSE(fs::exists(run_out));
  EXPECT_TRUE(Named(dir_, ".partial-").empty());
}

// kill -9 of compare cannot clean up, but its children die with it instead of writing on.
TEST_F(CliTest, ChildrenDieWithAKilledParent) {
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  const pid_t pid = Spawn({"compare", tiny, "--set", "run.steps=1000000", "--policies",
                           "static,deepseek", "--jobs", "2", "--out", (dir_ / "cmp").string()},
                          dir_);
  const std::set<pid_t> children = WaitForChildren(pid, 2);
  ASSERT_EQ(children.size(), 2u);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  for (int i = 0; i < 2000 && std::any_of(children.begin(), children.end(), Alive); ++i) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  for (pid_t child : children) EXPECT_FALSE(Alive(child)) << child;
}

#endif  // EPLB_HAVE_SIM

}  // namespace
}  // namespace eplb
