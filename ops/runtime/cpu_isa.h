// Run-time choice of instruction set for the hottest CPU loops.
//
// The library is compiled for the baseline ISA so it runs anywhere; loops
// that gain from wider vectors are compiled a second time for AVX2 (GCC and
// clang's target attribute on a wrapper around an always-inline body) and
// picked at run time. SCATTERX_CPU_ISA=baseline forces the portable path
// (the tests run both). No FMA: results must not depend on the ISA, and a
// fused multiply-add rounds differently (the library also builds with
// -ffp-contract=off for the same reason).
#pragma once

#include "ops/runtime/knobs.h"

namespace scatterx::detail {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SCATTERX_HAVE_AVX2_PATH 1
#define SCATTERX_TARGET_AVX2 __attribute__((target("avx2")))
#else
#define SCATTERX_HAVE_AVX2_PATH 0
#define SCATTERX_TARGET_AVX2
#endif

inline bool use_avx2() {
#if SCATTERX_HAVE_AVX2_PATH
  static const bool enabled = [] {
    if (knob_choice(Knob::CpuIsa) == "baseline") return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return enabled;
#else
  return false;
#endif
}

}  // namespace scatterx::detail
