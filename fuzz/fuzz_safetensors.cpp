// The safetensors reader (TensorRT-LLM's expert statistics).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "eplb/formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)eplb::ParseSafetensors(bytes, "fuzz.safetensors");
  return 0;
}
