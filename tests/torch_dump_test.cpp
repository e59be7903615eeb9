// PyTorch `.pt` dumps read without running them: dumps torch wrote (tests/data/torch, made by
// make_dumps.py) read as torch reads them, malformed ones refused by name, and every exploit
// refused with nothing run. The zip container and the pickle reader on hand-made bytes.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "eplb/base/checksum.h"
#include "eplb/base/file_io.h"
#include "eplb/formats/load_file.h"
#include "eplb/formats/torch_dump.h"
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

// --- Dumps built here, byte by byte: memo-heavy and hostile ones no engine writes -------------

// `v` as `width` little-endian bytes.
std::string Le(uint64_t v, int width) {
  std::string out;
  for (int i = 0; i < width; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
  return out;
}

// A zip archive of stored entries, as torch.save writes them (without its padding).
std::string Zip(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string out, directory;
  for (const auto& [name, data] : entries) {
    const uint64_t local = out.size();
    const uint32_t crc = Crc32(data);
    const std::string sizes = Le(crc, 4) + Le(data.size(), 4) + Le(data.size(), 4);
    out += Le(0x04034b50, 4) + Le(20, 2) + Le(0, 8) + sizes + Le(name.size(), 2) + Le(0, 2) + name +
           data;
    directory += Le(0x02014b50, 4) + Le(20, 2) + Le(20, 2) + Le(0, 8) + sizes + Le(name.size(), 2) +
                 Le(0, 8) + Le(0, 4) + Le(local, 4) + name;
  }
  const uint64_t at = out.size();
  return out + directory + Le(0x06054b50, 4) + Le(0, 4) + Le(entries.size(), 2) +
         Le(entries.size(), 2) + Le(directory.size(), 4) + Le(at, 4) + Le(0, 2);
}

// Pickle opcodes: BININT, LONG_BINPUT, LONG_BINGET, a tuple of small ints.
std::string Int(uint32_t v) {
  return "J" + Le(v, 4);
}
std::string Put(uint32_t memo) {
  return "r" + Le(memo, 4);
}
std::string Recall(uint32_t memo) {
  return "j" + Le(memo, 4);
}
std::string Ints(const std::vector<uint32_t>& v) {
  std::string out = "(";
  for (uint32_t x : v) out += Int(x);
  return out + "t";
}
// torch._utils._rebuild_tensor_v2 of storage `key` (`numel` elements of `type`).
std::string TensorOf(const std::string& key, const std::string& type, uint32_t numel,
                     const std::vector<uint32_t>& shape, const std::vector<uint32_t>& stride) {
  return "ctorch._utils\n_rebuild_tensor_v2\n((" + Short("storage") + "ctorch\n" + type + "\n" +
         Short(key) + Short("cpu") + Int(numel) + "tQ" + Int(0) + Ints(shape) + Ints(stride) +
         "\x89}tR";
}
template <typename T>
std::string Bytes(const std::vector<T>& v) {
  std::string out(v.size() * sizeof(T), '\0');
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}
std::string Repeat(const std::string& s, int64_t times) {
  std::string out;
  out.reserve(s.size() * static_cast<size_t>(times));
  for (int64_t i = 0; i < times; ++i) out += s;
  return out;
}

// A dump archive of `pickle` and storages (key, bytes), written to a temporary file.
std::string WriteDump(const std::string& name, const std::string& pickle,
                      const std::vector<std::pair<std::string, std::string>>& storages) {
  std::vector<std::pair<std::string, std::string>> entries = {{"d/data.pkl", pickle},
                                                              {"d/byteorder", "little"}};
  for (const auto& [key, bytes] : storages) entries.emplace_back("d/data/" + key, bytes);
  const std::string path = (fs::temp_directory_path() / ("eplb-memo-" + name + ".pt")).string();
  std::ofstream(path, std::ios::binary) << Zip(entries);
  return path;
}

// SGLang's per_pass dump whose records list names one record `refs` times (the pickle's memo),
// its counts a [1, 4] view of a storage of `storage` elements: the issue's file that took hours
// (a million references to a view of a 60 MB storage, the storage read and checked per
// reference), at a size a test runs.
std::string OneRecordNamedOften(int64_t refs, uint32_t storage) {
  std::vector<int64_t> big(storage, 0);
  big[0] = 3;
  big[2] = 5;
  big[3] = 1;
  const std::string pickle = "\x80\x02}(" + Short("last_physical_to_logical_map") +
                             TensorOf("m", "LongStorage", 4, {1, 4}, {4, 1}) + Short("records") +
                             "](}(" + Short("forward_pass_id") + Int(0) +
                             Short("global_physical_count") +
                             TensorOf("big", "LongStorage", storage, {1, 4}, {4, 1}) + "u" +
                             Put(0) + Repeat(Recall(0), refs - 1) + "eu.";
  return WriteDump("one-record-" + std::to_string(refs), pickle,
                   {{"m", Bytes<int64_t>({0, 1, 0, 1})}, {"big", Bytes(big)}});
}

TEST(TorchDumpWork, ARecordNamedOftenIsReadOnceWhateverTheCount) {
  TorchDumpWork few, many;
  auto a = ReadTorchDump(OneRecordNamedOften(10, 1 << 17), &few);
  auto b = ReadTorchDump(OneRecordNamedOften(100000, 1 << 17), &many);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  // Counted as often as the list names it, as Python sums the list: slots 0 and 2 hold expert 0.
  EXPECT_EQ(a->steps[0](0, 0), 10 * (3 + 5));
  EXPECT_EQ(b->steps[0](0, 0), 100000 * (3 + 5));
  EXPECT_EQ(b->steps[0](0, 1), 100000 * 1);
  // The same work for 10 and 100,000 references: each entry (byteorder, data.pkl, the map, the
  // 1 MiB storage) read and checked once, two tensors converted, the same values added.
  EXPECT_EQ(few.entries_checked, 4);
  EXPECT_EQ(many.entries_checked, 4);
  EXPECT_EQ(few.tensors_read, 2);
  EXPECT_EQ(many.tensors_read, 2);
  EXPECT_EQ(few.values, many.values);
  EXPECT_LT(many.bytes_checked, (int64_t{1} << 20) + 600000);  // the storage and the pickle, once
}

TEST(TorchDumpWork, TensorsViewingOneStorageCheckItOnce) {
  // Eight records, each its own tensor viewing another row of one storage: one CRC-32 of it.
  std::string records;
  for (uint32_t i = 0; i < 8; ++i) {
    records += "}(" + Short("forward_pass_id") + Int(i) + Short("global_physical_count") +
               "ctorch._utils\n_rebuild_tensor_v2\n((" + Short("storage") +
               "ctorch\nLongStorage\n" + Short("rows") + Short("cpu") + Int(32) + "tQ" +
               Int(4 * i) + Ints({1, 4}) + Ints({4, 1}) + "\x89}tRu";
  }
  std::vector<int64_t> rows(32);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
  const std::string path = WriteDump("rows",
                                     "\x80\x02}(" + Short("last_physical_to_logical_map") +
                                         TensorOf("m", "LongStorage", 4, {1, 4}, {4, 1}) +
                                         Short("records") + "](" + records + "eu.",
                                     {{"m", Bytes<int64_t>({0, 1, 2, 3})}, {"rows", Bytes(rows)}});
  TorchDumpWork work;
  auto s = ReadTorchDump(path, &work);
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->steps.size(), 8u);
  EXPECT_EQ(s->steps[7](0, 3), 31);
  EXPECT_EQ(work.entries_checked, 4);
  EXPECT_EQ(work.tensors_read, 9);
}

TEST(TorchDumpWork, WorkBeyondTheFilesBudgetIsRefusedBeforeItIsDone) {
  // Distinct records (each a few bytes) all recalling one tensor that views a whole storage of
  // 65,536 counts: each would add a pass of 65,536 values and sum them. A hundred fit the budget
  // of a 1 MiB file (~50M); a thousand would take ~130M and are refused naming the file.
  constexpr uint32_t kSlots = 1 << 16;
  auto make = [&](uint32_t records) {
    std::string list;
    for (uint32_t i = 0; i < records; ++i) {
      list += "}(" + Short("forward_pass_id") + Int(i) + Short("global_physical_count") +
              (i == 0 ? TensorOf("c", "LongStorage", kSlots, {1, kSlots}, {kSlots, 1}) + Put(1)
                      : Recall(1)) +
              "u";
    }
    std::vector<int64_t> ids(kSlots), counts(kSlots, 1);
    for (uint32_t i = 0; i < kSlots; ++i) ids[i] = i % 16;
    return WriteDump("budget-" + std::to_string(records),
                     "\x80\x02}(" + Short("last_physical_to_logical_map") +
                         TensorOf("m", "LongStorage", kSlots, {1, kSlots}, {kSlots, 1}) +
                         Short("records") + "](" + list + "eu.",
                     {{"m", Bytes(ids)}, {"c", Bytes(counts)}});
  };
  TorchDumpWork fits;
  auto ok = ReadTorchDump(make(100), &fits);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->steps.size(), 100u);
  EXPECT_EQ(ok->steps[99](0, 0), kSlots / 16);

  const std::string path = make(1000);
  TorchDumpWork over;
  auto refused = ReadTorchDump(path, &over);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(path + ": reading records["), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("the most a dump of"), std::string::npos);
  EXPECT_LE(over.values, TorchDumpWorkBudget(static_cast<int64_t>(fs::file_size(path))));
  EXPECT_EQ(over.entries_checked, 4);  // and the storage checked once on the way
}

TEST(TorchPickle, RepeatedKeysCollapseAsPythonSetsThem) {
  // {'a': 1, 'b': 2} then 100,000 more SETITEMS of 'a' (recalled from the memo): one dict of two
  // items whose 'a' is the last value set, as Python builds it. 'd' (DICT) collapses alike.
  const std::string pickle = "\x80\x02}" + Put(0) + "(" + Short("a") + Put(1) + "K\x01" +
                             Short("b") + "K\x02u(" + Repeat(Recall(1) + "K\x07", 99999) +
                             Recall(1) + "K\x09u.";
  auto g = Unpickle(pickle, "t");
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->at(g->root).items.size(), 4u);
  EXPECT_EQ(g->at(g->Get(g->root, "a")).integer, 9);
  EXPECT_EQ(g->at(g->Get(g->root, "b")).integer, 2);
  EXPECT_EQ(g->Get(g->root, "c"), -1);
  auto d = Unpickle("\x80\x02(" + Short("k") + "K\x01" + Short("k") + "K\x02" + Short("j") +
                        "K\x03" + Short("k") + "K\x04" + "d.",
                    "t");
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ(d->at(d->root).items.size(), 4u);
  EXPECT_EQ(d->at(d->at(d->root).items[0]).text, "k");  // its first place, its last value
  EXPECT_EQ(d->at(d->Get(d->root, "k")).integer, 4);
  EXPECT_EQ(d->at(d->Get(d->root, "j")).integer, 3);
}

TEST(TorchDumpWork, ARecordOfManyRepeatedKeysNamedOftenReadsInOnePass) {
  // The issue's second file at a test's size: one record whose forward_pass_id is set 200,000
  // times, named 20,000 times. The record is one dict of two keys; it is read once.
  const std::string pickle =
      "\x80\x02}(" + Short("last_physical_to_logical_map") +
      TensorOf("m", "LongStorage", 4, {1, 4}, {4, 1}) + Short("records") + "](}" +
      Short("forward_pass_id") + Put(1) + Int(0) + Put(2) + "s" + Short("global_physical_count") +
      TensorOf("c", "LongStorage", 4, {1, 4}, {4, 1}) + "s(" +
      Repeat(Recall(1) + Recall(2), 200000) + "u" + Put(0) + Repeat(Recall(0), 19999) + "eu.";
  TorchDumpWork work;
  auto s = ReadTorchDump(
      WriteDump("keys", pickle,
                {{"m", Bytes<int64_t>({0, 1, 2, 3})}, {"c", Bytes<int64_t>({1, 2, 3, 4})}}),
      &work);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->steps[0](0, 3), 20000 * 4);
  EXPECT_EQ(work.tensors_read, 2);
  // The map, the counts, the record, its pass and their sum into it: once each.
  EXPECT_EQ(work.values, 4 + 4 + 1 + 4 + 4);
}

TEST(TorchPickle, RecalledValuesCostOneNodeNotACopy) {
  // torch.Size of a 100,000-item tuple, called 1,000 times: the tuple itself each time (it never
  // changes), so the graph holds ~100,000 values, not 10^8.
  const std::string pickle = "\x80\x02(ctorch\nSize\n" + Put(0) + "(" + Repeat("K\x01", 100000) +
                             "t\x85" + Put(1) + "R" + Repeat(Recall(0) + Recall(1) + "R", 999) +
                             "l.";
  auto g = Unpickle(pickle, "t");
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->at(g->root).items.size(), 1000u);
  EXPECT_LT(g->nodes.size(), 100100u);
}

TEST(TorchPickle, MemoHeavyConstructsAreRefusedByName) {
  struct Case {
    std::string name, bytes, message;
  };
  const std::vector<Case> cases = {
      // A long argument tuple recalled for each REDUCE would be copied each time.
      {"REDUCE with many arguments",
       "\x80\x02"
       "ctorch._utils\n_rebuild_tensor_v2\n(" +
           Repeat("K\x01", 100) + "tR.",
       "REDUCE calls _rebuild_tensor_v2 with 100 arguments; it takes at most 7"},
      // A storage key is copied into every view of it.
      {"long storage key",
       "\x80\x02(" + Short("storage") + "ctorch\nFloatStorage\n" + Short(std::string(200, 'k')) +
           Short("cpu") + "K\x04tQ.",
       "a storage key of 200 bytes; torch.save names storages by number"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto g = Unpickle(c.bytes, "t");
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.status().message().find(c.message), std::string::npos) << g.status().message();
  }
}

// --- Counts are checked per physical slot, before replicas are added -------------------------

// vLLM's window [1 step, 1 layer, 4 slots] of float64 counts, slots 0 and 2 replicas of expert 0.
std::string VllmWindow(const std::string& name, const std::vector<double>& window) {
  return WriteDump("vllm-" + name,
                   "\x80\x02}(" + Short("expert_load_window") +
                       TensorOf("w", "DoubleStorage", 4, {1, 1, 4}, {4, 4, 1}) +
                       Short("physical_to_logical_map") +
                       TensorOf("m", "LongStorage", 4, {1, 4}, {4, 1}) + "u.",
                   {{"w", Bytes(window)}, {"m", Bytes<int64_t>({0, 1, 0, 1})}});
}

// SGLang's per_pass dump: one forward pass counted by two ranks, whose counts are summed.
std::string PerRank(const std::string& name, const std::vector<double>& rank0,
                    const std::vector<double>& rank1) {
  std::string records;
  for (const std::string key : {"r0", "r1"}) {
    records += "}(" + Short("forward_pass_id") + Int(0) + Short("global_physical_count") +
               TensorOf(key, "DoubleStorage", 4, {1, 4}, {4, 1}) + "u";
  }
  return WriteDump(
      "per-rank-" + name,
      "\x80\x02}(" + Short("last_physical_to_logical_map") +
          TensorOf("m", "LongStorage", 4, {1, 4}, {4, 1}) + Short("records") + "](" + records +
          "eu.",
      {{"m", Bytes<int64_t>({0, 1, 0, 1})}, {"r0", Bytes(rank0)}, {"r1", Bytes(rank1)}});
}

TEST(TorchDump, EveryCountIsCheckedBeforeReplicasOrRanksAreAdded) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    std::string name;
    std::vector<double> counts;  // slots 0 and 2 hold expert 0
    std::string message;         // after the file's name
  };
  const std::vector<Case> cases = {
      {"minus-seven", {-7, 0, 10, 0}, "counts -7 at layer 0, slot 0"},
      {"cancelling-huge", {1e300, 0, -1e300, 0}, "counts 1e+300 at layer 0, slot 0"},
      {"nan", {1, nan, 1, 0}, "counts nan at layer 0, slot 1"},
      {"inf", {1, 0, inf, 0}, "counts inf at layer 0, slot 2"},
      {"minus-inf", {inf, 0, -inf, 0}, "counts inf at layer 0, slot 0"},
      {"beyond-the-cap", {2e15, 0, 0, 0}, "counts 2000000000000000 at layer 0, slot 0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string window = VllmWindow(c.name, c.counts);
    auto v = ReadLoadSeries(window);
    ASSERT_FALSE(v.ok()) << "folded to " << v->steps[0];
    EXPECT_EQ(v.status().message(),
              window + ": expert_load_window[0] " + c.message +
                  "; counts must be finite, non-negative and at most 1e+15 tokens");
    // The same counts split over two ranks' records of one forward pass.
    std::vector<double> rank0 = c.counts, rank1(4, 0);
    std::swap(rank0[2], rank1[2]);
    const std::string ranks = PerRank(c.name, rank0, rank1);
    auto r = ReadLoadSeries(ranks);
    ASSERT_FALSE(r.ok()) << "summed to " << r->steps[0];
    const std::string record = c.message.ends_with("slot 2") ? "records[1]" : "records[0]";
    EXPECT_EQ(r.status().message(),
              ranks + ": " + record + ".global_physical_count " + c.message +
                  "; counts must be finite, non-negative and at most 1e+15 tokens");
  }
  // Counts that are counts fold and sum as before.
  auto v = ReadLoadSeries(VllmWindow("fine", {10, 1, 7, 2}));
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->steps[0](0, 0), 17);
  EXPECT_EQ(v->steps[0](0, 1), 3);
  auto r = ReadLoadSeries(PerRank("fine", {10, 1, 0, 2}, {0, 0, 7, 0}));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->steps[0](0, 0), 17);
  // Ranks each within the cap whose sum is not: named by the forward pass, before folding.
  const std::string sum = PerRank("sum", {9e14, 0, 0, 0}, {2e14, 0, 0, 0});
  EXPECT_EQ(ReadLoadSeries(sum).status().message(),
            sum +
                ": forward pass 0 (its records summed) counts 1100000000000000 at layer 0, slot "
                "0; counts must be finite, non-negative and at most 1e+15 tokens");
}

}  // namespace
}  // namespace eplb
