// The safetensors format (Hugging Face's; TensorRT-LLM writes its expert statistics in it):
// an 8-byte little-endian header length N, N bytes of JSON naming each tensor's dtype, shape and
// byte range, then the raw little-endian data. Every tensor is read as doubles.
//
// Errors name the file, the tensor and what would be valid; offsets, shapes and sizes are
// checked against each other and the file before any data is read.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "eplb/base/status.h"

namespace eplb {

struct Tensor {
  std::string dtype;           // as the file names it: F64, F32, F16, BF16, I64, I32, ...
  std::vector<int64_t> shape;  // empty for a scalar
  std::vector<double> values;  // row-major
};

// Bytes per element of a dtype named as safetensors does (F64, ..., BOOL); 0 for any other.
int DtypeBytes(std::string_view dtype);
// The little-endian element of `dtype` at `p` as a double (DtypeBytes(dtype) > 0).
double DecodeElement(std::string_view dtype, const char* p);

// Every tensor of `bytes` by name (`__metadata__` is skipped). `name` prefixes errors.
Result<std::map<std::string, Tensor>> ParseSafetensors(std::string_view bytes,
                                                       const std::string& name);

// A safetensors file of `tensors`, each written as F64 whatever its dtype says (the format's
// header JSON, padded to 8 bytes, then the data in name order). For the torch-dump reader's
// counterpart in tests, and for handing eplb tensors.
std::string WriteSafetensors(const std::map<std::string, Tensor>& tensors);

}  // namespace eplb
