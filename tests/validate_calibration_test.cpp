// `eplb validate --calibration FILE` (sim/one_gpu.h): a bad file is refused before the device
// run, naming the file, the key and the value, on a machine with or without a GPU.
#include "cli_fixture.h"

namespace eplb {
namespace {

class ValidateCalibration : public CliTest {};

TEST_F(ValidateCalibration, ABadFileIsRefusedBeforeTheDeviceRun) {
  const std::string negative = Write("negative.json", R"({"start_us": -1})");
  const std::string zero = Write("zero.json", R"({"copy_gbps": 0})");
  const std::string unknown = Write("unknown.json", R"({"round_ms": 3})");
  const std::string text = Write("text.json", R"({"commit_us": "0.3 ms"})");
  const std::string not_json = Write("not.json", "start_us = 1000\n");
  const std::string missing = (dir_ / "none.json").string();
  const std::string out = " --out " + (dir_ / "v").string();
  ExpectErrors({
      {"negative", "validate --virtual --calibration " + negative + out,
       negative + ": start_us is -1; it must be a finite number of at least 0"},
      {"zero rate", "validate --virtual --calibration " + zero + out,
       zero + ": copy_gbps is 0; it must be a finite number above 0"},
      {"unknown key", "validate --virtual --calibration " + unknown + out,
       unknown + ": unknown key 'round_ms'; the keys are copy_gbps, stream_gbps, "
                 "local_copy_gbps, round_us, start_us, commit_us, step_read_gbps"},
      {"not a number", "validate --virtual --calibration " + text + out,
       text + ": commit_us is \"0.3 ms\"; expected a number"},
      {"not JSON", "validate --virtual --calibration " + not_json + out, not_json + ": not JSON"},
      {"missing", "validate --virtual --calibration " + missing + out, missing},
  });
  EXPECT_FALSE(fs::exists(dir_ / "v"));  // nothing written
}

}  // namespace
}  // namespace eplb
