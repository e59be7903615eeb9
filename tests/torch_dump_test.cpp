// PyTorch `.pt` dumps read without running them: dumps torch wrote (tests/data/torch, made by
// make_dumps.py) read as torch reads them, malformed ones refused by name, and every exploit
// refused with nothing run. The zip container and the pickle reader on hand-made bytes.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "eplb/base/checksum.h"
#include "eplb/base/file_io.h"
#include "eplb/formats/load_file.h"
#include "eplb/formats/torch_pickle.h"
#include "eplb/formats/zip_archive.h"

namespace eplb {
namespace {

namespace fs = std::filesystem;

const std::string kDir = std::string(EPLB_TEST_DATA_DIR) + "/torch";

std::string Fixture(const std::string& kind, const std::string& name) {
  return kDir + "/" + kind + "/" + name + ".pt";
}

TEST(TorchDump, DumpsTorchWroteReadAsTorchComputesThem) {
  auto text = ReadTextFile(kDir + "/expected.json");
  ASSERT_TRUE(text.ok()) << text.status().message();
  const nlohmann::json expected = nlohmann::json::parse(*text);
  ASSERT_EQ(expected.size(), 7u);
  for (const auto& [name, steps] : expected.items()) {
    SCOPED_TRACE(name);
    auto series = ReadLoadSeries(Fixture("good", name));
    ASSERT_TRUE(series.ok()) << series.status().message();
    ASSERT_EQ(series->steps.size(), steps.size());
    for (size_t s = 0; s < steps.size(); ++s) {
      ASSERT_EQ(series->layers(), static_cast<int>(steps[s].size()));
      for (size_t l = 0; l < steps[s].size(); ++l) {
        ASSERT_EQ(series->experts(), static_cast<int>(steps[s][l].size()));
        for (size_t e = 0; e < steps[s][l].size(); ++e) {
          EXPECT_EQ(series->steps[s](l, e), steps[s][l][e].get<double>())
              << s << "," << l << "," << e;
        }
      }
    }
  }
}

TEST(TorchDump, AFolderOfDumpsIsOneSeriesInFileOrder) {
  const fs::path dir = fs::temp_directory_path() / "eplb-torch-folder";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(Fixture("good", "sglang_stat"), dir / "expert_distribution_recorder_2.pt");
  fs::copy_file(Fixture("good", "sglang_stat"), dir / "expert_distribution_recorder_1.pt");
  auto one = ReadLoadSeries(Fixture("good", "sglang_stat"));
  auto both = ReadLoadSeries(dir.string());
  ASSERT_TRUE(one.ok() && both.ok()) << both.status().message();
  ASSERT_EQ(both->steps.size(), 2 * one->steps.size());
  EXPECT_EQ(both->steps[3], one->steps[0]);
  // A folder mixing kinds is refused.
  fs::copy_file(Fixture("good", "vllm_window"), dir / "vllm.pt");
  auto mixed = ReadLoadSeries(dir.string());
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("mixes dumps of several kinds (stat, vllm)"),
            std::string::npos)
      << mixed.status().message();
  fs::remove_all(dir);
}

struct Refusal {
  std::string kind, name, message;
};

void ExpectRefusals(const std::vector<Refusal>& cases) {
  for (const Refusal& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = Fixture(c.kind, c.name);
    const std::string marker = "/tmp/eplb-exploit-ran-" + c.name;
    fs::remove(marker);
    auto series = ReadLoadSeries(path);
    ASSERT_FALSE(series.ok());
    EXPECT_EQ(series.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(series.status().message().find(path), std::string::npos) << series.status().message();
    EXPECT_NE(series.status().message().find(c.message), std::string::npos)
        << series.status().message();
    EXPECT_FALSE(fs::exists(marker)) << "the dump's code ran";
  }
}

TEST(TorchDump, DumpsThatAreNotCountsAreRefusedNamingWhatIsWrong) {
  ExpectRefusals({
      {"bad", "complex_counts", "logical_count is a tensor of complex numbers; expected real"},
      {"bad", "bool_counts", "logical_count is a tensor of bools; expected real counts"},
      {"bad", "float_map", "physical_to_logical_map is a tensor of F32; expected integer ids"},
      {"bad", "topk_beyond_slots",
       "records[0].topk_ids_of_layer holds slot 9; the map has slots 0 to 3"},
      {"bad", "huge_expert_id", "holds expert id 30000000; expected -1 (an empty slot) to"},
      {"bad", "negative_counts", "step 0: load of layer 0, expert 0 is -1"},
      {"bad", "other_keys", "has keys ['weights']; expected SGLang's logical_count"},
      {"bad", "legacy_format", "saved in PyTorch's legacy format"},
      {"bad", "empty_dict", "empty_dict.pt: an empty dict; expected SGLang's logical_count"},
      {"bad", "empty_records", "records is an empty list; the recorder saved no forward passes"},
      {"bad", "record_not_dict",
       "records[0] is an int; expected a dict with forward_pass_id and global_physical_count"},
      {"bad", "records_without_map",
       "has 'records' but no 'last_physical_to_logical_map'; an SGLang per_pass or per_token "
       "dump needs both"},
      {"bad", "parameter_counts", "holds an nn.Parameter; eplb reads plain tensors"},
  });
}

// Each would run `touch /tmp/eplb-exploit-ran-NAME` in a reader that runs pickles (make_dumps.py
// checks that Python's own unpickler runs the dotted one).
TEST(TorchDump, CodeInADumpNeverRuns) {
  ExpectRefusals({
      {"exploit", "global", "refused to load posix.system"},
      {"exploit", "reduce", "refused to load posix.system"},
      {"exploit", "dotted", "refused to load torch._utils._rebuild_tensor.__builtins__.get"},
      {"exploit", "torchscript", "a TorchScript archive"},
      {"exploit", "build", "refused BUILD"},
      {"exploit", "newobj", "refused to load builtins.object"},
  });
}

TEST(TorchDump, AFileOfAnotherKindIsRefusedWithoutQuotingIt) {
  const fs::path path = fs::temp_directory_path() / "eplb-secret.pt";
  std::ofstream(path) << "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n";
  auto series = ReadLoadSeries(path.string());
  ASSERT_FALSE(series.ok());
  EXPECT_NE(series.status().message().find("not a PyTorch archive"), std::string::npos)
      << series.status().message();
  EXPECT_EQ(series.status().message().find("OPENSSH"), std::string::npos);
  EXPECT_EQ(series.status().message().find("b3Bl"), std::string::npos);
  fs::remove(path);
}

// --- The zip container -----------------------------------------------------------------------

TEST(ZipArchive, Crc32IsZipsChecksum) {
  EXPECT_EQ(Crc32("123456789"), 0xCBF43926u);  // the standard check value
  EXPECT_EQ(Crc32(""), 0u);
  EXPECT_EQ(Crc32("56789", Crc32("1234")), 0xCBF43926u);  // in chunks, as manifests check files
  // Long enough for the eight-byte steps, with a tail of three.
  EXPECT_EQ(Crc32("The quick brown fox jumps over the lazy dog"), 0x414FA339u);
}

TEST(ZipArchive, DamageAnywhereIsRefusedNotMisread) {
  auto bytes = ReadTextFile(Fixture("good", "sglang_stat"));
  ASSERT_TRUE(bytes.ok());
  auto archive = ZipArchive::Open(*bytes, "stat.pt");
  ASSERT_TRUE(archive.ok()) << archive.status().message();
  const ZipArchive::Entry* data = archive->Find("sglang_stat/data/0");
  ASSERT_NE(data, nullptr);

  struct Case {
    std::string name, bytes, message;
  };
  std::string flipped = *bytes;
  flipped[data->offset + 3] ^= 0x40;
  std::string compressed = *bytes;
  std::string far_entry = *bytes;
  // The central directory's first entry: method at +10, local header offset at +42.
  const size_t directory = bytes->find("PK\x01\x02");
  ASSERT_NE(directory, std::string::npos);
  compressed[directory + 10] = 8;
  far_entry[directory + 42] = static_cast<char>(0xF0);
  far_entry[directory + 45] = 0x7F;
  const std::vector<Case> cases = {
      {"truncated", bytes->substr(0, bytes->size() - 30), "no zip end-of-directory record"},
      {"too short", "PK\x03\x04", "too short for a zip archive"},
      {"entry outside the file", far_entry, "its local header (offset"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto a = ZipArchive::Open(c.bytes, "stat.pt");
    ASSERT_FALSE(a.ok());
    EXPECT_TRUE(a.status().message().starts_with("stat.pt: ")) << a.status().message();
    EXPECT_NE(a.status().message().find(c.message), std::string::npos) << a.status().message();
  }
  // A compressed entry is listed, so that a TorchScript archive is known by its names, but
  // never read.
  auto listed = ZipArchive::Open(compressed, "stat.pt");
  ASSERT_TRUE(listed.ok()) << listed.status().message();
  auto inflated = listed->Read(listed->entries().front());
  ASSERT_FALSE(inflated.ok());
  EXPECT_NE(inflated.status().message().find("is compressed (method 8)"), std::string::npos);
  auto damaged = ZipArchive::Open(flipped, "stat.pt");
  ASSERT_TRUE(damaged.ok());
  auto read = damaged->Read(*damaged->Find("sglang_stat/data/0"));
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("is damaged: its CRC-32"), std::string::npos);
}

// --- The pickle reader ---------------------------------------------------------------------------

// SHORT_BINUNICODE s
std::string Short(const std::string& s) {
  std::string out = "\x8c";
  out += static_cast<char>(s.size());
  out += s;
  return out;
}

TEST(TorchPickle, ReadsTheValuesADumpHolds) {
  // {'a': [1, -2, 1.5, True, None, 'x'], 'b': (300, -70000, 2**40)} in protocol 4 opcodes.
  std::string p = "\x80\x04}(" + Short("a") + "](K\x01" + std::string("J\xfe\xff\xff\xff", 5) +
                  "G\x3f\xf8" + std::string(6, '\0') + "\x88N" + Short("x") + "e" + Short("b") +
                  "M\x2c\x01" + std::string("\x8a\x03\x90\xee\xfe", 5) +
                  std::string("\x8a\x06\x00\x00\x00\x00\x00\x01", 8) + "\x87u.";
  auto g = Unpickle(p, "t");
  ASSERT_TRUE(g.ok()) << g.status().message();
  const PickleNode& a = g->at(g->Get(g->root, "a"));
  ASSERT_EQ(a.kind, PickleKind::kList);
  ASSERT_EQ(a.items.size(), 6u);
  EXPECT_EQ(g->at(a.items[0]).integer, 1);
  EXPECT_EQ(g->at(a.items[1]).integer, -2);
  EXPECT_EQ(g->at(a.items[2]).number, 1.5);
  EXPECT_TRUE(g->at(a.items[3]).boolean);
  EXPECT_EQ(g->at(a.items[4]).kind, PickleKind::kNone);
  EXPECT_EQ(g->at(a.items[5]).text, "x");
  const PickleNode& b = g->at(g->Get(g->root, "b"));
  ASSERT_EQ(b.kind, PickleKind::kTuple);
  EXPECT_EQ(g->at(b.items[0]).integer, 300);
  EXPECT_EQ(g->at(b.items[1]).integer, -70000);
  EXPECT_EQ(g->at(b.items[2]).integer, int64_t{1} << 40);
}

TEST(TorchPickle, MalformedAndHostilePicklesAreRefusedByName) {
  struct Case {
    std::string name, bytes, message;
  };
  const std::vector<Case> cases = {
      {"no STOP", "\x80\x02}", "ends before its STOP"},
      {"empty stack",
       "\x80\x02"
       "a.",
       "pops an empty stack"},
      {"memo unset", "\x80\x02h\x05.", "memo 5 is read before it is set"},
      {"protocol 0 text", "I1\n.", "refused a protocol-0 text opcode"},
      {"integer beyond int64", "\x80\x02\x8a\x09" + std::string(9, '\x01') + ".", "beyond int64"},
      {"string past the end",
       "\x80\x02X\xff\xff\xff\x7f"
       "abc",
       "runs past the pickle's end"},
      {"eval",
       "\x80\x02"
       "cbuiltins\neval\n" +
           Short("1") + "\x85R.",
       "refused to load builtins.eval"},
      {"a dtype called",
       "\x80\x02"
       "ctorch\nfloat32\n)R.",
       "REDUCE calls a dtype"},
      {"tensor beyond its storage",
       "\x80\x02"
       "ctorch._utils\n_rebuild_tensor_v2\n((" +
           Short("storage") + "ctorch\nFloatStorage\n" + Short("0") + Short("cpu") +
           "K\x04tQK\x02K\x04\x85K\x01\x85"
           "\x89}tR.",
       "reaches element 5 of a storage of 4"},
      {"a bad persistent id", "\x80\x02" + Short("x") + "Q.", "a persistent id is not"},
      {"items left", "\x80\x02K\x01K\x02.", "leaves other values on its stack"},
      // Damage, not a refused construct: said so.
      {"not an opcode", std::string("\x00\x01\x02", 3),
       "0x00 is not a pickle opcode: data.pkl is damaged"},
      {"a cut GLOBAL",
       "\x80\x02"
       "ctorch\n_rebui",
       "damaged or truncated: a class name runs past"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto g = Unpickle(c.bytes, "t");
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.status().message().find(c.message), std::string::npos) << g.status().message();
  }
}

TEST(TorchPickle, CyclesAndDeepNestingCostNoRecursion) {
  // A list that holds itself, and 200,000 nested lists: values are indices into one arena.
  auto cycle = Unpickle(std::string("\x80\x02]q\x00h\x00"
                                    "a.",
                                    9),
                        "t");
  ASSERT_TRUE(cycle.ok()) << cycle.status().message();
  EXPECT_EQ(cycle->at(cycle->root).items[0], cycle->root);
  std::string deep = "\x80\x02";
  for (int i = 0; i < 200000; ++i) deep += "]";
  for (int i = 0; i < 199999; ++i) deep += "a";
  deep += ".";
  EXPECT_TRUE(Unpickle(deep, "t").ok());
}

}  // namespace
}  // namespace eplb
