// What every reader's fuzzer checks of an error besides its not crashing: it quotes input as
// base/excerpt.h says, so no control byte of the input (a terminal escape, ESC ] 0 ; ... BEL)
// reaches a message raw. eplb's own messages are single lines of printable text.
#pragma once

#include "eplb/base/status.h"

namespace eplb_fuzz {

inline void CheckQuoting(const eplb::Status& status) {
  for (const char c : status.message()) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) __builtin_trap();
  }
}

template <typename T>
void CheckQuoting(const eplb::Result<T>& result) {
  if (!result.ok()) CheckQuoting(result.status());
}

}  // namespace eplb_fuzz
