// Status and Result<T>: how eplb reports failures a user can cause (bad input, impossible
// configuration). Programming errors are asserts, never a Status.
//
// Thread-safety: both are plain values; distinct objects may be used from distinct threads.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace eplb {

class [[nodiscard]] Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,
    kNotFound,
    kIoError,
    kCancelled,
    kInternal,
    kUnavailable
  };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) {
    return {Code::kInvalidArgument, std::move(msg)};
  }
  static Status NotFound(std::string msg) { return {Code::kNotFound, std::move(msg)}; }
  static Status IoError(std::string msg) { return {Code::kIoError, std::move(msg)}; }
  static Status Cancelled(std::string msg) { return {Code::kCancelled, std::move(msg)}; }
  static Status Internal(std::string msg) { return {Code::kInternal, std::move(msg)}; }
  // What the run needs is not on this machine or not in this build (a GPU, a driver, a part
  // such as the simulator that was not built), or the machine cannot hold the output (a full
  // disk or quota).
  static Status Unavailable(std::string msg) { return {Code::kUnavailable, std::move(msg)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  // What the user can fix: arguments, missing or malformed files (the command line's exit 2).
  bool is_bad_input() const {
    return code_ == Code::kInvalidArgument || code_ == Code::kNotFound || code_ == Code::kIoError;
  }
  const std::string& message() const { return message_; }

  // A copy whose message is prefixed with `context` ("file.csv: ", "layer 3: ").
  Status WithContext(const std::string& context) const {
    return ok() ? *this : Status(code_, context + message_);
  }
  // A copy whose message ends with `suffix` ("; nothing was replaced").
  Status WithSuffix(const std::string& suffix) const {
    return ok() ? *this : Status(code_, message_ + suffix);
  }

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!status_.ok() && "a Result built from a Status must carry an error");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T& value() & {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace eplb

// Returns early from a function returning Status or Result<T> when `expr` is not OK.
#define EPLB_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::eplb::Status eplb_status_ = (expr);        \
    if (!eplb_status_.ok()) return eplb_status_; \
  } while (0)

// `lhs = value of expr`, where expr is a Result<T>; returns its Status early when it failed.
//   EPLB_ASSIGN_OR_RETURN(auto text, ReadTextFile(path));
//   EPLB_ASSIGN_OR_RETURN(folder.summary, ParseSummary(text, path));
// `lhs` may be a declaration ("auto text"), which parentheses would break.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define EPLB_ASSIGN_OR_RETURN(lhs, expr) \
  EPLB_ASSIGN_OR_RETURN_IMPL_(EPLB_STATUS_CONCAT_(eplb_result_, __LINE__), lhs, expr)
#define EPLB_ASSIGN_OR_RETURN_IMPL_(result, lhs, expr) \
  auto result = (expr);                                \
  if (!result.ok()) return result.status();            \
  lhs = std::move(result).value()
// NOLINTEND(bugprone-macro-parentheses)
#define EPLB_STATUS_CONCAT_(a, b) EPLB_STATUS_CONCAT_INNER_(a, b)
#define EPLB_STATUS_CONCAT_INNER_(a, b) a##b
