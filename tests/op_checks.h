// Checks shared by the correctness suites: run an op's out-of-place and
// in-place (or _out) forms on given arguments and compare both, bitwise, with
// the serial reference; check that inputs and storage outside the written
// view are untouched. Also the parameter lists and test names.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace sxt {

// ---------------------------------------------------------------- parameters

struct OpParam {
  DType dtype = DType::Float32;
  Reduce reduce = Reduce::None;
  DType index_dtype = DType::Int64;
  bool include_self = true;
  bool variant = false;  // suite-specific second form (scatter_'s value, index_add_'s alpha != 1)
  std::string name;
};

inline void PrintTo(const OpParam& p, std::ostream* os) { *os << p.name; }

struct ParamSpec {
  std::vector<Reduce> reduces = {Reduce::None};
  bool name_reduce = true;                            // put the reduce in the name
  bool vary_include_self = false;                     // both include_self values
  const char* variant_names[2] = {nullptr, nullptr};  // both variants when set
};

// dtype x reduce (those the dtype supports) x index dtype [x include_self] [x variant].
std::vector<OpParam> make_params(const ParamSpec& spec);
std::string param_name(const ::testing::TestParamInfo<OpParam>& info);

// Values that exercise a reduce: long products stay finite, NaN and inf are
// frequent for amax/amin, booleans lean so that and/or both vary.
ValueOptions value_options_for(Reduce reduce);

// index_add_'s alpha: 1 of the kind the dtype accepts (true for bool), or
// another value (integral for integers, false for bool, sometimes complex for
// complex, sometimes an integer for floating types).
Scalar one_alpha(DType dtype);
Scalar other_alpha(DType dtype, Rng& rng);

// Runs f(rng, case_number) for n cases, each with its own seed (printed on
// failure), until a case fails.
template <typename F>
void run_cases(int n, F&& f) {
  const std::string name = current_test_name();
  for (int i = 0; i < n; ++i) {
    const uint64_t seed = case_seed(name, i);
    SCOPED_TRACE("case " + std::to_string(i) + ", case seed " + std::to_string(seed) + ", base seed " +
                 std::to_string(base_seed()) + " (SCATTERX_TEST_SEED)");
    Rng rng(seed);
    f(rng, i);
    if (::testing::Test::HasFailure()) return;
  }
}

// ---------------------------------------------------------------- checks

enum class ScatterForm {
  Src,     // scatter_(self, dim, index, src, reduce) / scatter
  Value,   // scatter_(self, dim, index, value, reduce) / scatter
  Add,     // scatter_add_ / scatter_add
  Reduce,  // scatter_reduce_ / scatter_reduce
};

// src is unused for ScatterForm::Value, value for the others.
void check_scatter(ScatterForm form, Reduce reduce, bool include_self, int64_t dim, Buf& self, Buf& index, Buf* src,
                   const Scalar& value);

// index_add_ (reduce Sum, with alpha; default_alpha calls it without one) or index_reduce_.
// index_add_weighted (out of place, then in place) against the reference.
void check_index_add_weighted(int64_t dim, Buf& self, Buf& index, Buf& source, Buf& weights);

void check_index_op(Reduce reduce, bool include_self, const Scalar& alpha, bool default_alpha, int64_t dim, Buf& self,
                    Buf& index, Buf& source);

// gather / index_select, and their _out forms when out is given.
void check_gather(bool index_select, int64_t dim, Buf& input, Buf& index, Buf* out);

}  // namespace sxt
