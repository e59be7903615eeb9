#include "eplb/formats/safetensors.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "eplb/base/excerpt.h"
#include "eplb/formats/json.h"

namespace eplb {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

}  // namespace

int DtypeBytes(std::string_view dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL") return 1;
  return 0;
}

namespace {

double HalfToDouble(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double v = exponent == 0    ? std::ldexp(mantissa, -24)
             : exponent == 31 ? (mantissa ? NAN : INFINITY)
                              : std::ldexp(mantissa + 1024, exponent - 25);
  return sign ? -v : v;
}

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

double DecodeElement(std::string_view dtype, const char* p) {
  if (dtype == "F64") return Load<double>(p);
  if (dtype == "F32") return Load<float>(p);
  if (dtype == "F16") return HalfToDouble(Load<uint16_t>(p));
  if (dtype == "BF16") {
    const uint32_t bits = static_cast<uint32_t>(Load<uint16_t>(p)) << 16;
    return Load<float>(reinterpret_cast<const char*>(&bits));
  }
  if (dtype == "I64") return static_cast<double>(Load<int64_t>(p));
  if (dtype == "U64") return static_cast<double>(Load<uint64_t>(p));
  if (dtype == "I32") return Load<int32_t>(p);
  if (dtype == "U32") return Load<uint32_t>(p);
  if (dtype == "I16") return Load<int16_t>(p);
  if (dtype == "U16") return Load<uint16_t>(p);
  if (dtype == "I8") return Load<int8_t>(p);
  return Load<uint8_t>(p);  // U8, BOOL
}

Result<std::map<std::string, Tensor>> ParseSafetensors(std::string_view bytes,
                                                       const std::string& name) {
  if (bytes.size() < 8) {
    return Status::InvalidArgument(
        fmt::format("{}: {} bytes; a safetensors file starts with an 8-byte header length", name,
                    bytes.size()));
  }
  const uint64_t header_len = Load<uint64_t>(bytes.data());
  if (header_len > bytes.size() - 8) {
    return Status::InvalidArgument(fmt::format(
        "{}: the header length is {} but the file has {} bytes after it; not a safetensors file "
        "or a truncated one",
        name, header_len, bytes.size() - 8));
  }
  EPLB_ASSIGN_OR_RETURN(const nlohmann::json header,
                        ParseJson(bytes.substr(8, header_len), name + " (header)"));
  if (!header.is_object()) {
    return Status::InvalidArgument(name + ": the header is not a JSON object");
  }
  const std::string_view data = bytes.substr(8 + header_len);
  std::map<std::string, Tensor> out;
  std::vector<std::tuple<uint64_t, uint64_t, std::string>> spans;  // [begin, end), tensor
  for (const auto& [key, info] : header.items()) {
    if (key == "__metadata__") continue;
    const std::string where = fmt::format("{}: tensor '{}'", name, Excerpt(key));
    if (!info.is_object() || !info.contains("dtype") || !info["dtype"].is_string() ||
        !info.contains("shape") || !info["shape"].is_array() || !info.contains("data_offsets") ||
        !info["data_offsets"].is_array() || info["data_offsets"].size() != 2) {
      return Status::InvalidArgument(
          where + " needs dtype (a string), shape (an array) and data_offsets ([begin, end])");
    }
    Tensor t;
    t.dtype = info["dtype"].get<std::string>();
    const int width = DtypeBytes(t.dtype);
    if (width == 0) {
      return Status::InvalidArgument(fmt::format(
          "{} has dtype {}; expected one of F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, "
          "U16, U8, BOOL",
          where, Excerpt(t.dtype)));
    }
    uint64_t count = 1;
    for (const auto& d : info["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 40)) {
        return Status::InvalidArgument(fmt::format("{} has shape {}; expected non-negative sizes",
                                                   where, QuoteJson(info["shape"])));
      }
      t.shape.push_back(d.get<int64_t>());
      count *= d.get<uint64_t>();
      if (count > data.size()) break;
    }
    const auto& off = info["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned() ||
        off[0].get<uint64_t>() > off[1].get<uint64_t>() || off[1].get<uint64_t>() > data.size() ||
        count > data.size() ||
        off[1].get<uint64_t>() - off[0].get<uint64_t>() != count * static_cast<uint64_t>(width)) {
      return Status::InvalidArgument(fmt::format(
          "{} has shape {} of {} and data_offsets {}, but the data section holds {} bytes; the "
          "offsets must lie within it and span the shape's elements",
          where, QuoteJson(info["shape"]), Excerpt(t.dtype), QuoteJson(off), data.size()));
    }
    spans.emplace_back(off[0].get<uint64_t>(), off[1].get<uint64_t>(), key);
    out.emplace(key, std::move(t));  // its values are decoded once the tensors tile the data
  }
  // The format's rule: the tensors tile the data section, no byte read twice and none skipped.
  std::sort(spans.begin(), spans.end());
  uint64_t covered = 0;
  for (const auto& [begin, end, key] : spans) {
    if (begin != covered) {
      return Status::InvalidArgument(fmt::format(
          "{}: tensor '{}' starts at byte {} of the data section, but the tensors before it end "
          "at {}; safetensors' tensors tile the data section without {}",
          name, key, begin, covered, begin < covered ? "overlapping" : "gaps"));
    }
    covered = end;
  }
  if (covered != data.size()) {
    return Status::InvalidArgument(fmt::format(
        "{}: the tensors cover {} of the data section's {} bytes; safetensors' tensors tile it "
        "whole",
        name, covered, data.size()));
  }
  // Decoded only now: tensors that tile the data section hold each byte once, so a header naming
  // the whole section for each of a million tensors costs a refusal, not a million decodings.
  for (const auto& [begin, end, key] : spans) {
    Tensor& t = out.at(key);
    const uint64_t width = static_cast<uint64_t>(DtypeBytes(t.dtype));
    t.values.resize((end - begin) / width);
    for (uint64_t i = 0; i < t.values.size(); ++i) {
      t.values[i] = DecodeElement(t.dtype, data.data() + begin + i * width);
    }
  }
  return out;
}

std::string WriteSafetensors(const std::map<std::string, Tensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const size_t bytes = t.values.size() * sizeof(double);
    header[name] = {
        {"dtype", "F64"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string h = header.dump();
  h.resize((h.size() + 7) / 8 * 8, ' ');
  const uint64_t len = h.size();
  std::string out(reinterpret_cast<const char*>(&len), 8);
  out += h;
  for (const auto& [name, t] : tensors) {
    out.append(reinterpret_cast<const char*>(t.values.data()), t.values.size() * sizeof(double));
  }
  return out;
}

}  // namespace eplb
