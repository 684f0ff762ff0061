// The SCATTERX_* knob registry (ops/runtime/knobs.h): defaults, parsing, the
// errors for bad values, and README's table of them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "ops/runtime/knobs.h"
#include "tests/test_util.h"

namespace sxt {
namespace {

using scatterx::detail::all_knobs;
using scatterx::detail::Knob;
using scatterx::detail::knob_bytes;
using scatterx::detail::knob_choice;
using scatterx::detail::knob_flag;
using scatterx::detail::knob_seconds;
using scatterx::detail::knob_spec;
using scatterx::detail::KnobKind;
using scatterx::detail::KnobSpec;

// Reads a knob whatever its kind, as text.
std::string read(const KnobSpec& spec) {
  switch (spec.kind) {
    case KnobKind::Bytes:
      return std::to_string(knob_bytes(spec.knob));
    case KnobKind::Seconds:
      return std::to_string(knob_seconds(spec.knob));
    case KnobKind::Flag:
      return knob_flag(spec.knob) ? "1" : "0";
    case KnobKind::Choice:
      return knob_choice(spec.knob);
  }
  return "";
}

TEST(Knobs, EveryDefaultIsValidAndEmptyMeansDefault) {
  int count = 0;
  const KnobSpec* knobs = all_knobs(&count);
  ASSERT_EQ(count, 15);
  for (int i = 0; i < count; ++i) {
    SCOPED_TRACE(knobs[i].variable);
    EXPECT_EQ(static_cast<int>(knobs[i].knob), i);
    std::string unset;
    {
      ScopedEnv env(knobs[i].variable, nullptr);
      unset = read(knobs[i]);
    }
    ScopedEnv env(knobs[i].variable, "");
    EXPECT_EQ(read(knobs[i]), unset);
  }
}

TEST(Knobs, ValuesAreParsed) {
  {
    ScopedEnv env("SCATTERX_STREAMING_STORE_BYTES", "0");
    EXPECT_EQ(knob_bytes(Knob::StreamingStoreBytes), 0);
  }
  {
    ScopedEnv env("SCATTERX_DIST_TIMEOUT", "2.5");
    EXPECT_EQ(knob_seconds(Knob::DistTimeout), 2.5);
  }
  for (const char* on : {"1", "true", "ON", "yes"}) {
    ScopedEnv env("SCATTERX_DIST_CHECKS", on);
    EXPECT_TRUE(knob_flag(Knob::DistChecks)) << on;
  }
  for (const char* off : {"0", "false", "Off", "no"}) {
    ScopedEnv env("SCATTERX_DIST_SHM", off);
    EXPECT_FALSE(knob_flag(Knob::DistShm)) << off;
  }
  ScopedEnv env("SCATTERX_DIST_EMULATE_DEVICE", "direct");
  EXPECT_EQ(knob_choice(Knob::DistEmulateDevice), "direct");
  EXPECT_TRUE(knob_spec(Knob::DistEmulateDevice).test_only);
}

TEST(Knobs, BadValuesRaiseNamingTheVariableAndTheValue) {
  struct Case {
    const char* variable;
    const char* value;
    Knob knob;
    const char* message;
  };
  const Case cases[] = {
      {"SCATTERX_STREAMING_STORE_BYTES", "-5", Knob::StreamingStoreBytes,
       "SCATTERX_STREAMING_STORE_BYTES: expected a whole number of bytes from 0 to 4611686018427387904, got '-5'"},
      {"SCATTERX_DIST_CHUNK_BYTES", "64k", Knob::DistChunkBytes,
       "SCATTERX_DIST_CHUNK_BYTES: expected a whole number of bytes from 1 to 1099511627776, got '64k'"},
      {"SCATTERX_DIST_STAGING_CHUNK_BYTES", "99999999999999999999", Knob::DistStagingChunkBytes,
       "SCATTERX_DIST_STAGING_CHUNK_BYTES: expected a whole number of bytes from 1 to 1073741824, got "
       "'99999999999999999999'"},
      {"SCATTERX_DIST_TIMEOUT", "0", Knob::DistTimeout,
       "SCATTERX_DIST_TIMEOUT: expected a positive number of seconds, got '0'"},
      {"SCATTERX_DIST_TIMEOUT", "10s", Knob::DistTimeout,
       "SCATTERX_DIST_TIMEOUT: expected a positive number of seconds, got '10s'"},
      {"SCATTERX_DIST_CHECKS", "2", Knob::DistChecks, "SCATTERX_DIST_CHECKS: expected 0 or 1, got '2'"},
      {"SCATTERX_CPU_ISA", "avx512", Knob::CpuIsa, "SCATTERX_CPU_ISA: expected one of auto, baseline, got 'avx512'"},
      {"SCATTERX_DIST_SHM_STREAM", "yes", Knob::DistShmStream,
       "SCATTERX_DIST_SHM_STREAM: expected one of auto, 0, 1, got 'yes'"},
      {"SCATTERX_DIST_BROADCAST_ROOT_SHARE", "on", Knob::DistBroadcastRootShare,
       "SCATTERX_DIST_BROADCAST_ROOT_SHARE: expected one of auto, 0, 1, got 'on'"},
  };
  for (const Case& c : cases) {
    ScopedEnv env(c.variable, c.value);
    expect_error<scatterx::ArgumentError>([&] { (void)read(knob_spec(c.knob)); }, {c.message});
  }
}

// README's Environment table has a row for each knob, with its default.
TEST(Knobs, ReadmeListsEveryKnob) {
  std::ifstream file(std::string(SCATTERX_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(file.good());
  std::stringstream text;
  text << file.rdbuf();
  const std::string readme = text.str();
  int count = 0;
  const KnobSpec* knobs = all_knobs(&count);
  for (int i = 0; i < count; ++i) {
    const std::string row = std::string("| `") + knobs[i].variable + "` | `" + knobs[i].default_value + "` |";
    EXPECT_NE(readme.find(row), std::string::npos) << "README.md has no row starting " << row;
  }
}

}  // namespace
}  // namespace sxt
