#include "ops/runtime/knobs.h"

#include <strings.h>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <string>

#include "ops/error.h"

namespace scatterx::detail {

namespace {

constexpr KnobSpec kKnobs[] = {
#define SCATTERX_KNOB_SPEC(id, variable, kind, default_value, min, max, choices, test_only, doc) \
  {Knob::id, variable, KnobKind::kind, default_value, min, max, choices, test_only, doc},
    SCATTERX_KNOBS(SCATTERX_KNOB_SPEC)
#undef SCATTERX_KNOB_SPEC
};
constexpr int kKnobCount = static_cast<int>(sizeof(kKnobs) / sizeof(kKnobs[0]));

// The environment's text, or the default's when unset or empty.
std::string text_of(const KnobSpec& spec, KnobKind kind) {
  SCATTERX_CHECK(spec.kind == kind, ArgumentError, spec.variable, "read as the wrong kind of knob (internal error)");
  const char* env = std::getenv(spec.variable);
  return env == nullptr || env[0] == '\0' ? std::string(spec.default_value) : std::string(env);
}

[[noreturn]] void bad_value(const KnobSpec& spec, const std::string& expected, const std::string& text) {
  raise<ArgumentError>(spec.variable, "expected ", expected, ", got '", text, "'");
}

}  // namespace

const KnobSpec& knob_spec(Knob knob) { return kKnobs[static_cast<int>(knob)]; }

const KnobSpec* all_knobs(int* count) {
  *count = kKnobCount;
  return kKnobs;
}

int64_t knob_bytes(Knob knob) {
  const KnobSpec& spec = knob_spec(knob);
  const std::string text = text_of(spec, KnobKind::Bytes);
  const std::string expected = concat("a whole number of bytes from ", spec.min, " to ", spec.max);
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || errno == ERANGE || value < spec.min || value > spec.max) {
    bad_value(spec, expected, text);
  }
  return static_cast<int64_t>(value);
}

double knob_seconds(Knob knob) {
  const KnobSpec& spec = knob_spec(knob);
  const std::string text = text_of(spec, KnobKind::Seconds);
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !std::isfinite(value) || value <= 0) {
    bad_value(spec, "a positive number of seconds", text);
  }
  return value;
}

bool knob_flag(Knob knob) {
  const KnobSpec& spec = knob_spec(knob);
  const std::string text = text_of(spec, KnobKind::Flag);
  for (const char* on : {"1", "true", "on", "yes"}) {
    if (strcasecmp(text.c_str(), on) == 0) return true;
  }
  for (const char* off : {"0", "false", "off", "no"}) {
    if (strcasecmp(text.c_str(), off) == 0) return false;
  }
  bad_value(spec, "0 or 1", text);
}

std::string knob_choice(Knob knob) {
  const KnobSpec& spec = knob_spec(knob);
  const std::string text = text_of(spec, KnobKind::Choice);
  const std::string choices = spec.choices;
  size_t start = 0;
  while (start <= choices.size()) {
    const size_t bar = choices.find('|', start);
    const size_t stop = bar == std::string::npos ? choices.size() : bar;
    if (choices.compare(start, stop - start, text) == 0) return text;
    start = stop + 1;
  }
  std::string expected = "one of ";
  for (const char c : choices) expected += c == '|' ? std::string(", ") : std::string(1, c);
  bad_value(spec, expected, text);
}

}  // namespace scatterx::detail
