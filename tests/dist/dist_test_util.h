// Helpers of the distributed suite (scatterx_dist_tests, run under mpirun).
//
// Every test runs on every rank, in the same order. Inputs are defined by
// formulas of (rank, element index), so each rank computes the exact result
// it expects without talking to the others; values stay small integers (or
// NaN) so that sums, products and averages are exact in every dtype and in
// any order of reduction.
//
// DistTest's TearDown synchronizes the ranks through a communicator of the
// harness (plain MPI, independent of the library under test) and makes a
// test fail on every rank when it failed on any, so rank 0's report (the
// only one printed in full) shows it.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dist/dist.h"
#include "tests/test_util.h"

namespace sxd {

using scatterx::ArgumentError;
using scatterx::BFloat16;
using scatterx::Complex;
using scatterx::DType;
using scatterx::DTypeError;
using scatterx::Half;
using scatterx::Shape;
using scatterx::Tensor;
using scatterx::TensorView;
using scatterx::dist::Communicator;
using scatterx::dist::MismatchError;
using scatterx::dist::ReduceOp;
using scatterx::dist::TimeoutError;
using scatterx::dist::Work;
using sxt::error_message;

// ---------------------------------------------------------------- harness

// The world communicator of the suite (made once by main).
const Communicator& world();
// Set by main; reset before MPI is finalized.
void set_world(const Communicator* comm);
// Harness barrier / failure exchange over a plain MPI communicator (not the
// library's): returns the ranks whose flag is true.
std::vector<int> harness_ranks_with(bool flag);
void harness_barrier();

class DistTest : public ::testing::Test {
 protected:
  const Communicator& comm() const { return world(); }
  int rank() const { return world().rank(); }
  int ws() const { return world().size(); }
  void TearDown() override;
};

#define SXD_REQUIRE_WS2()                                               \
  do {                                                                  \
    if (world().size() < 2) GTEST_SKIP() << "needs at least two ranks"; \
  } while (0)

// ---------------------------------------------------------------- values

// A value of any dtype: real part (integers, bools as 0/1) and imaginary
// part (complex dtypes only).
struct V {
  double re = 0;
  double im = 0;
};

enum class Kind { Float, Complex, Signed, Unsigned, Bool };
Kind kind_of(DType dtype);

// Reads / writes element `linear` (row-major position in the view's logical
// shape) of any view.
void put(const TensorView& view, int64_t linear, V value);
V get(const TensorView& view, int64_t linear);

// view[i] = f(i) for every element.
void fill(const TensorView& view, const std::function<V(int64_t)>& f);
// A contiguous tensor of `shape` with t[i] = f(i).
Tensor make(const Shape& shape, DType dtype, const std::function<V(int64_t)>& f);

// Plain-data formula for the non-reducing collectives: every dtype holds it
// exactly (small, distinct per rank and position).
V plain_value(DType dtype, int rank, int64_t i);

// Inputs of a reduction: values whose op-reduction over any set of ranks is
// exact in every dtype (see the file's comment).
V reduce_input(ReduceOp op, DType dtype, int rank, int64_t i);
// op over ranks in `ranks` of reduce_input(op, dtype, r, i), as the dtype
// will hold it (integer avg floors, float avg divides in the accumulation
// type).
V reduce_expected(ReduceOp op, DType dtype, const std::vector<int>& ranks, int64_t i);
// Whether the contract supports op on dtype (complex: no min/max; bool: no avg).
bool reduce_supported(ReduceOp op, DType dtype);

// 0, 1, ..., n-1 (n <= 256), built once per n.
const std::vector<int>& iota_ranks(int n);
const std::vector<ReduceOp>& all_reduce_ops();
std::string op_label(ReduceOp op);
const std::vector<DType>& test_dtypes();

// ---------------------------------------------------------------- layouts

enum class Layout { Contiguous, Transposed, Strided, Flipped };
std::string layout_label(Layout layout);

// A view of `shape` with the layout over storage it owns; the storage is
// filled with a sentinel and snapshotted, so a test can check that an op
// wrote nothing outside the view.
struct Buf {
  Tensor base;
  TensorView view;
  std::vector<unsigned char> snapshot;

  void take_snapshot();
  ::testing::AssertionResult unchanged_outside_view() const;
};
Buf make_buf(const Shape& shape, DType dtype, Layout layout);

// ---------------------------------------------------------------- checks

// actual[i] == expected(i) for every element (bitwise; any NaN equals any NaN).
::testing::AssertionResult holds(const TensorView& actual, const std::function<V(int64_t)>& expected);

// A sum all_reduce of `n` float32 elements on c, checked against the closed
// form: that c still works (after an error, say).
void expect_all_reduce_works(const Communicator& c, int64_t n = 1000);

// msg contains every piece; a piece "a|b" is either spelling (the header's
// argument name or torch.distributed's).
::testing::AssertionResult mentions(const std::string& msg, std::initializer_list<std::string> pieces);
// msg names rank r: "rank 3", "ranks 1 and 3", "rank=3", "from 3"...: the
// word rank followed by r in the same clause.
::testing::AssertionResult names_rank(const std::string& msg, int r);

// An argument error: ArgumentError or DTypeError (either is acceptable
// where the contract does not say which); returns the message.
template <typename F>
std::string expect_local_error(F&& f) {
  try {
    f();
  } catch (const ArgumentError& e) {
    return e.what();
  } catch (const DTypeError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw the wrong exception type (not ArgumentError/DTypeError), with message: " << e.what();
    return "";
  }
  ADD_FAILURE() << "threw nothing";
  return "";
}

double seconds_since(std::chrono::steady_clock::time_point start);

// Threads of this process (/proc/self/task): progress threads come and go
// with their communicators.
int64_t thread_count();

}  // namespace sxd
