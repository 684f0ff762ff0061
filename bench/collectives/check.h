// The result check: scatterx's output against MPI's for the same inputs,
// element by element. Exact ops (the all-gather, the all-to-alls) must be
// bit-identical; sums may differ by the order of addition and are held to a
// tolerance per dtype (float32 rtol = atol = 1e-5, float64 1e-12, bfloat16 1e-2).
#pragma once

#include <cstdint>
#include <string>

#include "ops/tensor.h"

namespace scatterx_bench_collectives {

// One rank's findings; main() combines the ranks' (sum, min, max).
struct Check {
  int64_t mismatches = 0;  // elements outside tolerance (or not bit-identical, when exact is required)
  int bitwise = 1;         // all bit-identical
  double max_abs = 0;      // largest |difference| (inf for NaN against a number)
  int error = 0;           // scatterx raised, or returned the wrong shape / splits
  std::string message;     // this rank's error text
};

// got (scatterx) against want (MPI); exact: any bit difference is a mismatch.
void compare(const scatterx::TensorView& got, const scatterx::TensorView& want, bool exact, Check& c);

}  // namespace scatterx_bench_collectives
