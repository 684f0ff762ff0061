#include "ops/runtime/build_info.h"

#include <omp.h>

#include <cstdlib>
#include <string>

#include "ops/cuda.h"
#include "ops/error.h"
#include "ops/runtime/build_config.h"
#include "ops/runtime/cpu_isa.h"
#include "ops/runtime/knobs.h"
#include "ops/version.h"

namespace scatterx {

namespace {

using detail::KnobKind;
using detail::KnobSpec;

// Reads the knob as the library would, to learn whether its value is valid.
void read_knob(const KnobSpec& spec) {
  switch (spec.kind) {
    case KnobKind::Bytes:
      (void)detail::knob_bytes(spec.knob);
      return;
    case KnobKind::Seconds:
      (void)detail::knob_seconds(spec.knob);
      return;
    case KnobKind::Flag:
      (void)detail::knob_flag(spec.knob);
      return;
    case KnobKind::Choice:
      (void)detail::knob_choice(spec.knob);
      return;
  }
}

KnobValue knob_value(const KnobSpec& spec) {
  const char* env = std::getenv(spec.variable);
  KnobValue value;
  value.variable = spec.variable;
  value.from_environment = env != nullptr && env[0] != '\0';
  value.text = value.from_environment ? env : spec.default_value;
  try {
    read_knob(spec);
  } catch (const ArgumentError& e) {
    value.error = e.what();
  }
  return value;
}

}  // namespace

BuildInfo build_info() {
  BuildInfo info;
  info.version = SCATTERX_VERSION;
  info.compiler = SCATTERX_BUILD_COMPILER;
  info.build_type = SCATTERX_BUILD_TYPE[0] != '\0' ? SCATTERX_BUILD_TYPE : "unknown";
  info.cuda_built = cuda::is_built();
  info.cuda_architectures = SCATTERX_BUILD_CUDA_ARCHITECTURES;
  info.cuda_compiler = SCATTERX_BUILD_CUDA_COMPILER;
  info.cuda_devices = cuda::device_count();
  info.distributed_built = SCATTERX_BUILD_WITH_MPI != 0;
  info.cpu_isa = detail::use_avx2() ? "avx2" : "baseline";
#ifdef _OPENMP
  info.openmp = true;
  info.openmp_version = SCATTERX_BUILD_OPENMP_VERSION;
  info.openmp_max_threads = omp_get_max_threads();
#endif
  int count = 0;
  const KnobSpec* knobs = detail::all_knobs(&count);
  for (int i = 0; i < count; ++i) info.knobs.push_back(knob_value(knobs[i]));
  return info;
}

ReportRows build_rows(const BuildInfo& info) {
  return {
      {"scatterx", info.version},
      {"compiler", info.compiler},
      {"build type", info.build_type},
      {"CUDA backend", info.cuda_built ? "built" : "not built"},
      {"CUDA architectures", info.cuda_architectures},
      {"CUDA compiler", info.cuda_compiler},
      {"CUDA devices", std::to_string(info.cuda_devices)},
      {"distributed layer", info.distributed_built ? "built" : "not built"},
      {"CPU ISA", info.cpu_isa},
      {"OpenMP", info.openmp ? info.openmp_version : std::string("no")},
      {"OpenMP max threads", std::to_string(info.openmp_max_threads)},
  };
}

ReportRows knob_rows(const BuildInfo& info) {
  ReportRows rows;
  for (const KnobValue& knob : info.knobs) {
    std::string value = knob.text + (knob.from_environment ? "" : " (default)");
    if (!knob.error.empty()) value += " (invalid: " + knob.error + ")";
    rows.emplace_back(knob.variable, value);
  }
  return rows;
}

std::string format_rows(const ReportRows& rows) {
  std::string text;
  for (const auto& [name, value] : rows) text += name + ": " + value + "\n";
  return text;
}

std::string format_build_info(const BuildInfo& info) {
  return format_rows(build_rows(info)) + format_rows(knob_rows(info));
}

}  // namespace scatterx
