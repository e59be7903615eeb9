// Output folders and the leftovers of killed writers: a folder named like eplb's partial folder
// is removed only when it is provably eplb's, and a user's folder of that name is named and kept.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

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
  struct Named {
    fs::path path;
    pid_t pid;
  };
  Named Leftover(const std::string& dir_name) const {
    const pid_t pid = DeadPid();
    return {dir_ / (dir_name + ".partial-" + HostForPartials() + "-" + std::to_string(pid)), pid};
  }

  Status WriteOne(const std::string& dir_name) const {
    return WriteFolderAtomically((dir_ / dir_name).string(), "run", [](const std::string& p) {
      return WriteTextFile(p + "/metrics.csv", "step\n0\n");
    });
  }

  fs::path dir_;
};

// The marker eplb writes into a folder of this name: a partial one it fills, or an old one it
// moved aside to remove.
std::string Marker(const char* state, pid_t pid) {
  return std::string("eplb ") + state + " folder\nkind\trun\nhost\t" + HostForPartials() +
         "\npid\t" + std::to_string(pid) + "\n";
}

TEST_F(OutputFolderTest, LeftoversProvablyEplbsAreRemovedAndOthersKept) {
  struct Case {
    const char* name;
    bool removed;                   // the folder is gone after the next write
    std::vector<const char*> kept;  // what must still be there otherwise
    void (*make)(const fs::path&, pid_t);
  };
  const Case cases[] = {
      {"marked: killed while filling",
       true,
       {},
       [](const fs::path& p, pid_t pid) {
         Put(p / ".eplb-partial", Marker("partial", pid));
         Put(p / "metrics.csv", "step\n");
       }},
      {"marker made, not yet written, and nothing else",
       true,
       {},
       [](const fs::path& p, pid_t) { Put(p / ".eplb-partial", ""); }},
      {"an old folder moved aside and marked: killed while removing it",
       true,
       {},
       [](const fs::path& p, pid_t pid) {
         Put(p / "metrics.csv", "step\n");
         Put(p / "figures/a.svg", "<svg/>");
         ASSERT_TRUE(WriteFolderManifest(p.string(), "run").ok());
         Put(p / ".eplb-partial", Marker("replaced", pid));
         fs::remove(p / "metrics.csv");  // the removal had begun
       }},
      {"an old folder moved aside, with a file of the user's in it",
       false,
       {"notes.txt"},
       [](const fs::path& p, pid_t pid) {
         Put(p / "metrics.csv", "step\n");
         ASSERT_TRUE(WriteFolderManifest(p.string(), "run").ok());
         Put(p / ".eplb-partial", Marker("replaced", pid));
         Put(p / "notes.txt", "mine");
       }},
      // Killed between making the folder and its marker: nothing in it is anyone's.
      {"empty", true, {}, [](const fs::path&, pid_t) {}},
      {"an empty marker beside other files",
       false,
       {".eplb-partial", "metrics.csv"},
       [](const fs::path& p, pid_t) {
         Put(p / ".eplb-partial", "");
         Put(p / "metrics.csv", "step\n");
       }},
      {"a finished folder the user wrote with --out at this name, annotated",
       false,
       {"metrics.csv", "manifest.tsv", "notes.txt"},
       [](const fs::path& p, pid_t) {
         Put(p / "metrics.csv", "step\n");
         ASSERT_TRUE(WriteFolderManifest(p.string(), "run").ok());
         Put(p / "notes.txt", "mine");
       }},
      {"a two-line manifest beside the user's file",
       false,
       {"thesis.tex", "manifest.tsv"},
       [](const fs::path& p, pid_t) {
         Put(p / "manifest.tsv", "# eplb folder manifest v2\nkind\trun\n");
         Put(p / "thesis.tex", "mine");
       }},
      {"the user's files",
       false,
       {"thesis.tex"},
       [](const fs::path& p, pid_t) { Put(p / "thesis.tex", "mine"); }},
      {"the user's file named like the marker",
       false,
       {".eplb-partial"},
       [](const fs::path& p, pid_t) { Put(p / ".eplb-partial", "my notes"); }},
      {"a marker naming another process",
       false,
       {".eplb-partial", "metrics.csv"},
       [](const fs::path& p, pid_t pid) {
         Put(p / ".eplb-partial", Marker("partial", pid + 1));
         Put(p / "metrics.csv", "step\n");
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Named left = Leftover("out");
    fs::create_directories(left.path);
    c.make(left.path, left.pid);
    testing::internal::CaptureStderr();
    ASSERT_TRUE(WriteOne("out").ok());
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(fs::exists(left.path), !c.removed);
    if (c.removed) {
      EXPECT_EQ(err, "");
    } else {
      EXPECT_NE(err.find("kept " + left.path.string()), std::string::npos) << err;
      for (const char* f : c.kept) EXPECT_TRUE(fs::exists(left.path / f)) << f;
      fs::remove_all(left.path);
    }
  }
}

// A name eplb never writes (a PID with a leading zero) is not its leftover: left alone, unread.
TEST_F(OutputFolderTest, ANameEplbNeverWritesIsLeftAlone) {
  const Named left = Leftover("out");
  const fs::path padded =
      dir_ / ("out.partial-" + HostForPartials() + "-0" + std::to_string(left.pid));
  Put(padded / ".eplb-partial", Marker("partial", left.pid));
  Put(padded / "metrics.csv", "step\n");
  testing::internal::CaptureStderr();
  ASSERT_TRUE(WriteOne("out").ok());
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_TRUE(fs::exists(padded / "metrics.csv"));
}

// A manifest's path through a link the folder holds never removes what the link points to.
TEST_F(OutputFolderTest, ALeftoversListedFileIsNeverRemovedThroughALink) {
  const Named left = Leftover("out");
  Put(dir_ / "elsewhere/metrics.csv", "precious");
  Put(left.path / "sub/metrics.csv", "step\n");
  ASSERT_TRUE(WriteFolderManifest(left.path.string(), "run").ok());
  fs::remove_all(left.path / "sub");
  fs::create_directory_symlink(dir_ / "elsewhere", left.path / "sub");
  Put(left.path / ".eplb-partial", Marker("replaced", left.pid));
  testing::internal::CaptureStderr();
  ASSERT_TRUE(WriteOne("out").ok());
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(fs::exists(dir_ / "elsewhere/metrics.csv"));
  EXPECT_NE(err.find("kept " + left.path.string()), std::string::npos) << err;
}

// Replacing a folder leaves nothing of the old one behind, and no partial folder.
TEST_F(OutputFolderTest, AReplacedFolderIsGoneWhole) {
  ASSERT_TRUE(WriteOne("out").ok());
  ASSERT_TRUE(WriteOne("out").ok());
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "out");
  }
  EXPECT_EQ(entries, 1u);
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
