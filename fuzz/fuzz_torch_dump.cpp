// The PyTorch `.pt` reader: the zip container, the pickle read as data, and the dumps' tensors,
// through the same entry point `rebalance --load` and `workload.trace` use. The input goes to a
// file because the reader takes a path (a dump may be a folder of files). Seeds include memo-heavy
// dumps (fuzz/seeds/torch_dump, fuzz/make_torch_dump_seeds.py); every input must read in work
// linear in its size, which the reader's counters check here.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "eplb/formats/load_file.h"
#include "eplb/formats/torch_dump.h"
#include "eplb/formats/torch_pickle.h"
#include "eplb/formats/zip_archive.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // The pickle reader alone, so that mutations reach its opcodes without a valid zip around them.
  (void)eplb::Unpickle(bytes, "fuzz.pkl");
  if (auto archive = eplb::ZipArchive::Open(bytes, "fuzz.pt"); archive.ok()) {
    for (const auto& entry : archive->entries()) (void)archive->Read(entry);
  }
  static const std::string path = "/tmp/eplb-fuzz-torch-dump-" + std::to_string(getpid()) + ".pt";
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
    eplb::TorchDumpWork work;
    (void)eplb::ReadTorchDump(path, &work);
    // Each entry is checked at most once (entries are disjoint), and what the dump made eplb
    // read or add up stays within its budget, however often the pickle recalls a value.
    const auto file_bytes = static_cast<int64_t>(size);
    if (work.bytes_checked > file_bytes || work.values > eplb::TorchDumpWorkBudget(file_bytes)) {
      __builtin_trap();
    }
    std::remove(path.c_str());
  }
  return 0;
}
