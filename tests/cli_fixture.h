// The fixture of the command-line tests: a fresh folder per test and `eplb` run as a user
// would run it.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace eplb {

namespace fs = std::filesystem;

struct CliRun {
  int code = -1;
  std::string out;
  std::string err;
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A parameterised test's name holds a '/': one folder per test all the same.
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');
    dir_ = fs::temp_directory_path() / ("eplb_cli_" + name + "_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }

  // Runs eplb with `args`; `env` (VAR=value ...) goes before it.
  CliRun Eplb(const std::string& args, const std::string& env = "") {
    const std::string err_path = (dir_ / "stderr.txt").string();
    const std::string cmd = env + " " + std::string(EPLB_BINARY) + " " + args + " 2>" + err_path;
    CliRun r;
    FILE* f = popen(cmd.c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) r.out.append(buf, n);
    const int status = pclose(f);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = testing::ReadFile(err_path);
    return r;
  }

  std::string ReadmeLoad() {
    return Write("load.csv",
                 "90,132,40,61,104,165,39,4,73,56,183,86\n"
                 "20,107,104,64,19,197,187,157,172,86,16,27\n");
  }

  // Each case exits 2, names the problem on stderr and prints nothing on stdout.
  void ExpectErrors(const std::vector<struct ErrorCase>& cases);

  fs::path dir_;
};

struct ErrorCase {
  std::string name;
  std::string args;
  std::string expected;  // a part of stderr
};

inline void CliTest::ExpectErrors(const std::vector<ErrorCase>& cases) {
  for (const auto& c : cases) {
    const CliRun r = Eplb(c.args);
    EXPECT_EQ(r.code, 2) << c.name << ": " << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << c.name << ": stderr was: " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.name << ": stdout was: " << r.out;
  }
}

}  // namespace eplb
