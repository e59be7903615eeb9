// Output folders and the leftovers of killed writers: a folder named like eplb's partial folder
// is removed only when it is provably eplb's, and a user's folder of that name is named and kept.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "eplb/base/file_io.h"

namespace eplb {
namespace {

namespace fs = std::filesystem;

std::string HostForPartials() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "host";
  std::string name(host);
  std::replace(name.begin(), name.end(), '-', '_');
  std::replace(name.begin(), name.end(), '/', '_');
  return name;
}

pid_t DeadPid() {
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  return dead;
}

void Put(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

class OutputFolderTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("eplb-output-folder-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A folder named as a killed process of this machine would have left DIR's partial folder.
  fs::path Leftover(const std::string& dir_name) const {
    return dir_ / (dir_name + ".partial-" + HostForPartials() + "-" + std::to_string(DeadPid()));
  }

  Status WriteOne(const std::string& dir_name) const {
    return WriteFolderAtomically((dir_ / dir_name).string(), "run", [](const std::string& p) {
      return WriteTextFile(p + "/metrics.csv", "step\n0\n");
    });
  }

  fs::path dir_;
};

TEST_F(OutputFolderTest, LeftoversProvablyEplbsAreRemovedAndOthersKept) {
  struct Case {
    const char* name;
    bool eplbs;  // removed by the next write
    void (*make)(const fs::path&);
  };
  const Case cases[] = {
      {"empty: killed right after it was made", true, [](const fs::path&) {}},
      {"marked: killed while filling", true,
       [](const fs::path& p) {
         Put(p / ".eplb-partial", "eplb partial folder\nkind\trun\n");
         Put(p / "metrics.csv", "step\n");
       }},
      {"marker made, not yet written", true,
       [](const fs::path& p) {
         Put(p / ".eplb-partial", "");
         Put(p / "metrics.csv", "step\n");
       }},
      {"whole with its manifest: killed after it", true,
       [](const fs::path& p) {
         Put(p / "metrics.csv", "step\n");
         ASSERT_TRUE(WriteFolderManifest(p.string(), "run").ok());
       }},
      {"the user's files", false, [](const fs::path& p) { Put(p / "thesis.tex", "mine"); }},
      {"the user's file named like the marker", false,
       [](const fs::path& p) { Put(p / ".eplb-partial", "my notes"); }},
      {"a manifest that no longer matches", false,
       [](const fs::path& p) {
         Put(p / "metrics.csv", "step\n");
         ASSERT_TRUE(WriteFolderManifest(p.string(), "run").ok());
         Put(p / "metrics.csv", "step\n0\n1\n");  // edited since: may be the user's now
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path left = Leftover("out");
    fs::create_directories(left);
    c.make(left);
    testing::internal::CaptureStderr();
    ASSERT_TRUE(WriteOne("out").ok());
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(fs::exists(left), !c.eplbs);
    if (c.eplbs) {
      EXPECT_EQ(err, "");
    } else {
      EXPECT_NE(err.find("kept " + left.string()), std::string::npos) << err;
      fs::remove_all(left);
    }
  }
}

// The finished folder holds exactly what fill wrote and its manifest: no marker.
TEST_F(OutputFolderTest, TheMarkerIsNoFileOfTheResult) {
  ASSERT_TRUE(WriteOne("out").ok());
  auto manifest = ReadFolderManifest((dir_ / "out").string());
  ASSERT_TRUE(manifest.ok()) << manifest.status().message();
  ASSERT_EQ(manifest->files.size(), 1u);
  EXPECT_EQ(manifest->files[0].path, "metrics.csv");
  EXPECT_FALSE(fs::exists(dir_ / "out" / ".eplb-partial"));
  // While fill runs, the marker is there: a kill at that instant leaves a provable leftover.
  bool marked = false;
  ASSERT_TRUE(WriteFolderAtomically((dir_ / "out").string(), "run", [&](const std::string& p) {
                marked = fs::exists(fs::path(p) / ".eplb-partial");
                return WriteTextFile(p + "/metrics.csv", "step\n");
              }).ok());
  EXPECT_TRUE(marked);
}

// This process's own partial name, taken by a folder of the user's: refused, and kept whole.
TEST_F(OutputFolderTest, OurOwnPartialNameHeldByTheUserIsRefusedNotEmptied) {
  const fs::path ours =
      dir_ / ("out.partial-" + HostForPartials() + "-" + std::to_string(getpid()));
  Put(ours / "thesis.tex", "mine");
  const Status s = WriteOne("out");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(ours.string() + " exists and is not an eplb leftover"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(fs::exists(ours / "thesis.tex"));
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

}  // namespace
}  // namespace eplb
