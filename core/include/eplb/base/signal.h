// Signal: observers attached to an event source, in the style of SimGrid's xbt::signal. A trace
// writer hears about rounds and commits by connecting to the rearranger's signals.
//
// Thread-safety: Connect before the source starts emitting. Emission may happen from several
// threads at once (the rearranger's workers), so connected callbacks must be thread-safe.
#pragma once

#include <functional>
#include <utility>
#include <vector>

namespace eplb {

template <typename Signature>
class Signal;

template <typename... Args>
class Signal<void(Args...)> {
 public:
  using Callback = std::function<void(Args...)>;
  void Connect(Callback callback) { callbacks_.push_back(std::move(callback)); }
  void operator()(const Args&... args) const {
    for (const auto& callback : callbacks_) callback(args...);
  }

 private:
  std::vector<Callback> callbacks_;
};

}  // namespace eplb
