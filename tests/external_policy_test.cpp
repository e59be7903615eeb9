// A policy that is a user's program (policy/external_policy.h): DeepSeek's algorithm written as
// a user would write it gives the built-in's placements, and the run folder number for number;
// every way a program can go wrong fails with a message naming it, and leaves no folder.
#include "eplb/policy/external_policy.h"

#include <signal.h>

#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_fixture.h"
#include "eplb/policy/deepseek.h"
#include "eplb/policy/policies.h"
#include "folder_compare.h"
#include "test_util.h"

namespace eplb {
namespace {

const std::string kPython = "/usr/bin/python3";
const std::string kPolicyDir = std::string(EPLB_SOURCE_DIR) + "/tools/policy";

// A Python policy for the tests: `body` is the function `policy(load, old, **topology)`'s,
// served with tools/policy/policy_client.py unless `raw` (then `body` is the whole program).
std::string PolicyScript(const std::string& body, bool raw = false) {
  if (raw) return body;
  return "import sys, os, signal, struct, time\nimport numpy as np\nsys.path.insert(0, '" +
         kPolicyDir +
         "')\nfrom policy_client import serve\n"
         "def policy(load, old, *, nodes, gpus, groups, lost, step):\n" +
         body + "\nserve(policy)\n";
}

// A program speaking the protocol by hand, without policy_client.py's checks, so that eplb's own
// checks of a reply are what a test reaches: `body` runs per request with `old` and replies
// with reply(array), which sends any array as int32.
std::string RawPolicyScript(const std::string& body) {
  return "import sys, os, struct\nimport numpy as np\n"
         "out, inp = sys.stdout.buffer, sys.stdin.buffer\n"
         "def reply(a):\n"
         "    a = np.asarray(a).astype('<i4')\n"
         "    out.write(b'EPLR' + struct.pack('<3i', 0, *a.shape) + a.tobytes()); out.flush()\n"
         "out.write(b'EPLH' + struct.pack('<i', 1)); out.flush()\n"
         "while (head := inp.read(44)):\n"
         "    _, _, layers, experts, slots, gpus, *_ = struct.unpack('<4s10i', head)\n"
         "    inp.read(gpus); inp.read(8 * layers * experts)\n"
         "    old = np.frombuffer(inp.read(4 * layers * slots), '<i4').reshape(layers, slots)\n" +
         body + "\n";
}

class ExternalPolicyTest : public CliTest {
 protected:
  // Registers `script` (written to a file) as the policy `name` and returns a fresh policy.
  std::unique_ptr<Policy> Program(const std::string& name, const std::string& script,
                                  double timeout_s = 20) {
    const std::string path = Write(name + ".py", script);
    EXPECT_TRUE(RegisterExternalPolicy({name, kPython + " " + path, timeout_s}).ok());
    return std::move(MakePolicy(name)).value();
  }
};

TEST_F(ExternalPolicyTest, DeepSeekWrittenInPythonPlacesAsTheBuiltIn) {
  std::mt19937_64 rng(58);
  ASSERT_TRUE(RegisterExternalPolicy(
                  {"deepseek-py", kPython + " " + kPolicyDir + "/deepseek_policy.py", 60})
                  .ok());
  struct Shape {
    int nodes, gpus_per_node, slots_per_gpu, experts, groups;
  };
  // Hierarchical (groups a multiple of nodes), and the global fallback (they are not).
  for (const Shape s : {Shape{2, 2, 5, 16, 4}, Shape{2, 4, 3, 16, 4}, Shape{1, 4, 6, 20, 4},
                        Shape{2, 2, 6, 18, 3}}) {
    const Topology topo = testing::MakeTopology(s.nodes, s.gpus_per_node, s.slots_per_gpu);
    // One program per shape, asked again and again.
    const std::unique_ptr<Policy> program = std::move(MakePolicy("deepseek-py")).value();
    DeepSeekPolicy builtin;
    for (int call = 0; call < 4; ++call) {
      SCOPED_TRACE(fmt::format("{} nodes × {} GPUs × {} slots, {} experts, call {}", s.nodes,
                               s.gpus_per_node, s.slots_per_gpu, s.experts, call));
      const LoadMatrix load = testing::RandomLoad(rng, 3, s.experts);
      const Placement current = testing::RandomPlacement(rng, 3, topo.num_slots(), s.experts);
      const PolicyInput input{load, topo, &current, s.groups};
      auto mine = program->Rebalance(input);
      ASSERT_TRUE(mine.ok()) << mine.status().message();
      auto theirs = builtin.Rebalance(input);
      ASSERT_TRUE(theirs.ok()) << theirs.status().message();
      EXPECT_EQ(mine->phy2log_flat(), theirs->phy2log_flat());
    }
  }
}

TEST_F(ExternalPolicyTest, TheIdentityKeepsThePlacement) {
  std::mt19937_64 rng(1);
  auto policy = Program("identity", PolicyScript("    return old"));
  const Topology topo = testing::MakeTopology(2, 2, 4);
  const LoadMatrix load = testing::RandomLoad(rng, 2, 12);
  const Placement current = testing::RandomPlacement(rng, 2, topo.num_slots(), 12);
  auto p = policy->Rebalance({load, topo, &current, 1});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, current);
}

// Each bad program fails the call with its own message, naming the program.
TEST_F(ExternalPolicyTest, BadProgramsFailClearly) {
  struct Case {
    std::string name;
    std::string script;
    std::string expected;
    std::vector<int> lost = {};
    double timeout_s = 20;
  };
  const std::vector<Case> cases = {
      {"wrong shape", RawPolicyScript("    reply(old[:, :-1])"),
       "returned a placement of 2 × 15; it must be layers × slots = 2 × 16"},
      {"missing expert", PolicyScript("    out = old.copy(); out[1, :] = 0; return out"),
       "returned a placement that is not valid: layer 1: logical expert 1 has no replica"},
      {"out of range", RawPolicyScript("    a = old.copy(); a[0, 3] = 99; reply(a)"),
       "phy2log[0][3] is 99; valid values are -1 (empty) or 0..11"},
      {"expert on a lost GPU",
       PolicyScript("    return old"),
       "in slot 4 of layer 0, on GPU 1, which is lost: a lost GPU's slots must be empty",
       {1}},
      {"NaN", PolicyScript("    return np.full(old.shape, np.nan)"),
       "reported an error: the policy returned float64 of shape (2, 16)"},
      {"NaN bytes on the pipe",
       "import sys, struct\n"
       "sys.stdout.buffer.write(b'EPLH' + struct.pack('<i', 1)); sys.stdout.flush()\n"
       "sys.stdin.buffer.read(44)\n"
       "sys.stdout.buffer.write(struct.pack('<d', float('nan')) * 8); sys.stdout.flush()\n"
       "sys.stdin.buffer.read()\n",
       "wrote \"\\x00\\x00\\x00\\x00\\x00\\x00\\xf8\\x7f\" where its reply's magic \"EPLR\""},
      {"raises", PolicyScript("    raise ValueError('no idea what to do')"),
       "reported an error: the policy raised ValueError: no idea what to do"},
      {"exits", RawPolicyScript("    sys.exit(3)"), "exited with status 3 after 0 of the 8 bytes"},
      {"exits through the client", PolicyScript("    sys.exit(3)"),
       "reported an error: the policy raised SystemExit(3)"},
      {"a line break in the error",
       PolicyScript("    raise ValueError('a\\neplb: all runs passed')"),
       "reported an error: the policy raised ValueError: a\\neplb: all runs passed"},
      {"a line break in a raw error",
       RawPolicyScript("    m = b'a\\neplb: all runs passed'\n"
                       "    out.write(b'EPLR' + struct.pack('<2i', 1, len(m)) + m); out.flush()"),
       "reported an error: a\\x0aeplb: all runs passed"},
      {"crashes", PolicyScript("    os.kill(os.getpid(), signal.SIGSEGV)"), "killed by signal 11"},
      {"hangs",
       PolicyScript("    time.sleep(60)"),
       "gave no reply within 0.5 s (--policy-timeout; 0 of the 8 bytes",
       {},
       0.5},
      {"replies too late",
       PolicyScript("    time.sleep(2); return old"),
       "gave no reply within 0.5 s",
       {},
       0.5},
      {"prints garbage", PolicyScript("    print('thinking...'); return old"),
       "wrote \"thinking\" where its reply's magic \"EPLR\" belongs: it must write only the "
       "protocol on stdout"},
      {"no greeting",
       "import sys\nprint('hello, world'); sys.stdout.flush(); sys.stdin.buffer.read()\n",
       "wrote \"hello, w\" where its greeting \"EPLH\" and protocol version 1 belong"},
      {"bad status",
       "import sys, struct\n"
       "sys.stdout.buffer.write(b'EPLH' + struct.pack('<i', 1)); sys.stdout.flush()\n"
       "sys.stdin.buffer.read(44)\n"
       "sys.stdout.buffer.write(b'EPLR' + struct.pack('<i', 7)); sys.stdout.flush()\n"
       "sys.stdin.buffer.read()\n",
       "replied with status 7; the status is 0"},
  };
  std::mt19937_64 rng(2);
  const Topology topo = testing::MakeTopology(2, 2, 4);
  const LoadMatrix load = testing::RandomLoad(rng, 2, 12);
  const Placement current = Placement::Initial(2, 12, topo.num_slots()).value();
  int index = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string name = fmt::format("bad{}", index++);
    auto policy = Program(name, c.script, c.timeout_s);
    PolicyInput input{load, topo, &current, 1};
    input.lost_ranks = c.lost;
    auto p = policy->Rebalance(input);
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.status().message().find(c.expected), std::string::npos) << p.status().message();
    EXPECT_NE(p.status().message().find("the program '" + kPython), std::string::npos)
        << p.status().message();
  }
  // A command that is not a program.
  ASSERT_TRUE(RegisterExternalPolicy({"missing", "no-such-program-for-eplb", 20}).ok());
  auto p = std::move(MakePolicy("missing")).value()->Rebalance({load, topo, &current, 1});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("could not be started (exit status 127"), std::string::npos)
      << p.status().message();
}

TEST_F(ExternalPolicyTest, NoCommandNoProgram) {
  // "external" reads back from a run folder, but runs nothing until a command is given.
  auto policy = MakePolicy("external");
  ASSERT_TRUE(policy.ok());
  const Topology topo = testing::MakeTopology(1, 2, 2);
  const LoadMatrix load = LoadMatrix::Constant(1, 4, 1.0);
  auto p = (*policy)->Rebalance({load, topo});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("a user's program, which a scenario or run folder never "
                                      "names"),
            std::string::npos)
      << p.status().message();
  EXPECT_FALSE(ParsePolicyCommand("", 60).ok());
  EXPECT_FALSE(ParsePolicyCommand("python3 x.py", 0).ok());
  EXPECT_EQ(ParsePolicyCommand("mine=python3 x.py", 60)->name, "mine");
  EXPECT_EQ(ParsePolicyCommand("FOO= python3 x.py", 60)->name, "external");
  EXPECT_EQ(ParsePolicyCommand("python3 x.py --a=b", 60)->name, "external");
  EXPECT_FALSE(RegisterExternalPolicy({"deepseek", "python3 x.py", 60}).ok());
}

#ifdef EPLB_HAVE_SIM

TEST_F(ExternalPolicyTest, DeepSeekInPythonGivesTheBuiltInsRunFolder) {
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  const std::string mine = (dir_ / "mine").string(), theirs = (dir_ / "theirs").string();
  // free: the clock does not wait for the program, so that the folder is the same whatever
  // the machine (priced, the default, is below).
  const CliRun a =
      Eplb("run " + tiny + " --no-trace --policy-time free --out " + mine + " --policy-command '" +
           kPython + " " + kPolicyDir + "/deepseek_policy.py'");
  ASSERT_EQ(a.code, 0) << a.err;
  const CliRun b = Eplb("run " + tiny + " --no-trace --set eplb.policy=deepseek --out " + theirs);
  ASSERT_EQ(b.code, 0) << b.err;
  for (const auto& entry : fs::directory_iterator(theirs)) {
    const std::string file = entry.path().filename().string();
    SCOPED_TRACE(file);
    const std::string x = testing::ReadFile(mine + "/" + file);
    const std::string y = testing::ReadFile(theirs + "/" + file);
    if (file == "manifest.tsv") continue;  // the checksums of the files below
    if (file == "summary.json") {
      EXPECT_EQ(testing::WithoutWallClock(nlohmann::json::parse(x)),
                testing::WithoutWallClock(nlohmann::json::parse(y)));
    } else if (file == "rearrangements.csv") {
      EXPECT_EQ(testing::DropColumn(x, "policy_ms"), testing::DropColumn(y, "policy_ms"));
    } else if (file == "scenario.yaml") {
      // The program is recorded, for the reader only.
      EXPECT_NE(x.find("policy: external  # a user's program, run only when given again: "
                       "--policy-command '" +
                       kPython),
                std::string::npos)
          << x;
    } else {
      EXPECT_EQ(x, y);
    }
  }
  // A folder made with a user's program reads back, and runs it only when given again.
  const CliRun again = Eplb("run " + mine + "/scenario.yaml --out " + (dir_ / "again").string());
  EXPECT_EQ(again.code, 2);
  EXPECT_NE(again.err.find("eplb.policy is 'external': a user's program, which a scenario or run "
                           "folder never names"),
            std::string::npos)
      << again.err;
  EXPECT_FALSE(fs::exists(dir_ / "again"));

  // Priced, the step boundary waits for each call's wall time before the rearrangement starts,
  // as in an engine: the run stalls by their sum, and the program's start is no call's time.
  const std::string priced = (dir_ / "priced").string();
  const CliRun p = Eplb("run " + tiny + " --no-trace --out " + priced + " --policy-command '" +
                        kPython + " " + kPolicyDir + "/deepseek_policy.py'");
  ASSERT_EQ(p.code, 0) << p.err;
  const auto summary = nlohmann::json::parse(testing::ReadFile(priced + "/summary.json"));
  const double ms = summary["rearrangements"]["policy_ms_mean"].get<double>();
  const int started = summary["rearrangements"]["started"].get<int>();
  // Over every rearrangement (summary.json's stalled_s is the measured window's only).
  const auto stalled = [](const std::string& dir) {
    std::istringstream csv(testing::ReadFile(dir + "/rearrangements.csv"));
    std::string line, cell;
    std::getline(csv, line);
    std::istringstream header(line);
    size_t column = 0;
    while (std::getline(header, cell, ',') && cell != "stalled_s") ++column;
    double sum = 0;
    while (std::getline(csv, line)) {
      std::istringstream row(line);
      for (size_t i = 0; i <= column; ++i) std::getline(row, cell, ',');
      sum += std::stod(cell);
    }
    return sum;
  };
  EXPECT_NEAR(stalled(priced) - stalled(theirs), ms * started * 1e-3, 1e-4);
}

TEST_F(ExternalPolicyTest, CompareAndSweepLabelTheProgramByItsName) {
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  const std::string program = "mine=" + kPython + " " + kPolicyDir + "/deepseek_policy.py";
  const CliRun c = Eplb("compare " + tiny + " --no-trace --policies deepseek,mine --out " +
                        (dir_ / "cmp").string() + " --policy-command '" + program + "'");
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("\nmine "), std::string::npos) << c.out;
  const auto rows =
      nlohmann::json::parse(testing::ReadFile((dir_ / "cmp/comparison.json").string()));
  ASSERT_EQ(rows["policies"].size(), 2u);
  EXPECT_EQ(rows["policies"][1]["label"], "mine");
  EXPECT_EQ(rows["policies"][0]["balancedness_mean"], rows["policies"][1]["balancedness_mean"]);
  // A file names every program's policy `external` (the comment keeps its name), so that the
  // folder reads back anywhere.
  EXPECT_NE(testing::ReadFile((dir_ / "cmp/mine/scenario.yaml").string())
                .find("policy: external  # a user's program, run only when given again: "
                      "--policy-command 'mine="),
            std::string::npos);
  const CliRun s = Eplb("sweep " + tiny + " --no-trace --vary eplb.step_interval=100,200 --out " +
                        (dir_ / "sweep").string() + " --policy-command '" + program + "'");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_TRUE(fs::exists(dir_ / "sweep/points/1"));
}

TEST_F(ExternalPolicyTest, ABadProgramFailsTheRunAndLeavesNoFolder) {
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  const std::string exits = Write("exits.py", RawPolicyScript("    sys.exit(3)"));
  const std::string hangs = Write("hangs.py", PolicyScript("    time.sleep(60)"));
  const std::string lost =
      Write("lost.py", RawPolicyScript("    a = old.copy(); a[2, 0] = 99; reply(a)"));
  ExpectErrors({
      {"exits",
       "run " + tiny + " --out " + (dir_ / "a").string() + " --policy-command '" + kPython + " " +
           exits + "'",
       "step 24: policy external: the program '" + kPython + " " + exits +
           "' exited with status 3"},
      {"hangs",
       "run " + tiny + " --out " + (dir_ / "b").string() + " --policy-timeout 0.5" +
           " --policy-command '" + kPython + " " + hangs + "'",
       "gave no reply within 0.5 s (--policy-timeout"},
      {"bad value",
       "run " + tiny + " --out " + (dir_ / "c").string() + " --policy-command 'p=" + kPython + " " +
           lost + "'",
       "step 24: policy p: the program '" + kPython + " " + lost +
           "' returned a placement that is not valid: phy2log[2][0] is 99"},
      {"empty", "run " + tiny + " --policy-command ''", "--policy-command is empty"},
      {"twice in a run", "run " + tiny + " --policy-command a --policy-command b",
       "--policy-command is given more than once"},
      {"built-in's name", "compare " + tiny + " --policy-command 'static=python3 x.py'",
       "'static' is a built-in policy's name"},
  });
  // compare's run fails in its job, on the user's program as run's does: bad input (exit status
  // 2, as run's), and its folder is not written.
  const CliRun c = Eplb("compare " + tiny + " --policies static --out " + (dir_ / "d").string() +
                        " --policy-command '" + kPython + " " + exits + "'");
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find("external: step 24: policy external: the program '" + kPython + " " + exits +
                       "' exited with status 3"),
            std::string::npos)
      << c.err;
  for (const char* folder : {"a", "b", "c", "d"}) EXPECT_FALSE(fs::exists(dir_ / folder)) << folder;
}

// Ctrl-C stops eplb and the program: in run, eplb stops it; in compare, the simulation's process
// that started it dies and takes it along.
TEST_F(ExternalPolicyTest, CtrlCStopsBothProcesses) {
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  for (const std::string command : {"run", "compare --policies static"}) {
    SCOPED_TRACE(command);
    const std::string pid_file = (dir_ / "pid").string();
    fs::remove(pid_file);
    const std::string hangs = Write("hangs.py", PolicyScript("    open('" + pid_file +
                                                             "', 'w').write(str(os.getpid()))\n"
                                                             "    time.sleep(60)"));
    const std::string script =
        std::string(EPLB_BINARY) + " " + command + " " + tiny + " --out " +
        (dir_ / "out").string() + " --policy-command '" + kPython + " " + hangs +
        "' >/dev/null 2>&1 & E=$!; while [ ! -s " + pid_file +
        " ]; do sleep 0.05; done; kill -INT $E; wait $E; echo rc=$?; sleep 0.5; " +
        // A zombie is gone too: nothing here may reap what init inherits.
        "ps -o stat= -p $(cat " + pid_file + ") | grep -qv Z && echo alive || echo gone";
    FILE* f = popen(("sh " + Write("ctrl_c.sh", script)).c_str(), "r");
    std::string out;
    char buf[256];
    for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
    pclose(f);
    EXPECT_NE(out.find("rc=130"), std::string::npos) << out;
    EXPECT_NE(out.find("gone"), std::string::npos) << out;
    EXPECT_FALSE(fs::exists(dir_ / "out"));
  }
}

// Nothing a program starts outlives eplb, however it ends: a child the program put in a session
// of its own (setsid: out of reach of the program's group) when the program times out, and a
// shell-syntax command's program (the shell, not the program, is eplb's child) when eplb is
// killed with SIGKILL, which it cannot catch.
TEST_F(ExternalPolicyTest, NoProgramOutlivesEplb) {
  const std::string tiny = std::string(EPLB_SCENARIO_DIR) + "/tiny.yaml";
  const std::string pid_file = (dir_ / "pid").string();
  // Records the PID of the process that must be gone, then hangs.
  const auto hanging = [&](const std::string& who) {
    return PolicyScript(who + "    open('" + pid_file +
                        "', 'w').write(str(pid))\n"
                        "    time.sleep(60)");
  };
  const std::string escapes =
      Write("escapes.py", hanging("    pid = os.fork()\n"
                                  "    if pid == 0:\n"
                                  "        os.setsid(); time.sleep(60); os._exit(0)\n"));
  const std::string stays = Write("stays.py", hanging("    pid = os.getpid()\n"));
  const std::string script =
      // 1. The program times out; its setsid() child must go with it.
      std::string(EPLB_BINARY) + " run " + tiny + " --out " + (dir_ / "a").string() +
      " --policy-timeout 1 --policy-command '" + kPython + " " + escapes +
      "' >/dev/null 2>&1; echo rc=$?; sleep 0.3; echo first_pid=$(cat " + pid_file +
      "); "
      "ps -o stat= -p $(cat " +
      pid_file + ") | grep -qv Z && echo first=alive || echo first=gone; " + "rm -f " + pid_file +
      "; " +
      // 2. eplb is killed while a shell's program runs: the program must go with it.
      EPLB_BINARY + " run " + tiny + " --out " + (dir_ / "b").string() +
      " --policy-command 'true; " + kPython + " " + stays + "' >/dev/null 2>&1 & E=$!; " +
      "for i in $(seq 400); do [ -s " + pid_file + " ] && break; sleep 0.05; done; " +
      "kill -KILL $E; wait $E; sleep 0.5; echo second_pid=$(cat " + pid_file + "); " +
      "ps -o stat= -p $(cat " + pid_file +
      ") | grep -qv Z && echo second=alive || "
      "echo second=gone";
  FILE* f = popen(("sh " + Write("outlive.sh", script)).c_str(), "r");
  std::string out;
  char buf[256];
  for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  pclose(f);
  EXPECT_NE(out.find("rc=2"), std::string::npos) << out;
  // A PID was recorded each time (else "gone" would say nothing), and its process is gone.
  EXPECT_TRUE(std::regex_search(out, std::regex("first_pid=[0-9]+\n"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("second_pid=[0-9]+\n"))) << out;
  EXPECT_NE(out.find("first=gone"), std::string::npos) << out;
  EXPECT_NE(out.find("second=gone"), std::string::npos) << out;
}
#endif  // EPLB_HAVE_SIM

}  // namespace
}  // namespace eplb
