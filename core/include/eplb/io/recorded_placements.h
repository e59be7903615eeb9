// Recorded placements for --policy-replay and eplb.recorded() (policy/recorded_policy.h), each
// form told by what the file holds:
//   a run folder, or its placements.jsonl   every rearrangement its policy made, at its step
//                                            (rearrangements.csv) with the placement its
//                                            commits reached (placements.jsonl); the folder's
//                                            initial placement when it is not vLLM's
//   a sequence, JSON lines or a JSON array   {"step": N, "phy2log": [[...] per layer]} each
//                                            ("physical_to_logical_map" as the engines name it)
//   one placement, applied from step 0      eplb's {"phy2log": ...}, SGLang's
//                                            --init-expert-location JSON and vLLM's EPLB state
//                                            ({"physical_to_logical_map": ...}), also as
//                                            torch.save's .pt (read as data, no code run), a
//                                            bare [layers][slots] map of logical ids (-1
//                                            empty), or TensorRT-LLM's moe_load_balancer.yaml
// SGLang's logical_count form is refused, saying why: it is a load, which SGLang places with
// its own algorithm at start.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "eplb/base/status.h"
#include "eplb/policy/recorded_policy.h"

namespace eplb {

// The recording at `path`, for the policy `name`. Errors name the file, the line or entry, the
// field and what is valid; a file not yet recognised as a recording is not quoted.
Result<Recording> ReadRecording(const std::string& path, std::string name);
// The same from a file's text (`name` for messages; `path` is what the recording records).
Result<Recording> ParseRecording(std::string_view text, const std::string& path, std::string name);

}  // namespace eplb
