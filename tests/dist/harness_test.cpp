// Self-checks of the suite's harness, disabled in normal runs; ctest runs
// them with --gtest_also_run_disabled_tests and expects the run to fail
// (tests/dist/expect_failure.cmake):
// - a failure on one rank only fails the run (exit status) and shows in
//   rank 0's report;
// - a rank that leaves a collective test early (a failed ASSERT) does not
//   hang its peers: they get TimeoutError from the world's timeout.
#include <gtest/gtest.h>

#include "tests/dist/dist_test_util.h"

namespace sxd {
namespace {

namespace dist = scatterx::dist;

class HarnessSelfCheck : public DistTest {};

TEST_F(HarnessSelfCheck, DISABLED_FailsOnLastRankOnly) {
  SXD_REQUIRE_WS2();
  EXPECT_NE(rank(), ws() - 1) << "deliberate failure on the last rank";
}

TEST_F(HarnessSelfCheck, DISABLED_LastRankSkipsACollective) {
  SXD_REQUIRE_WS2();
  Tensor t = Tensor::zeros({1000}, DType::Float32);
  ASSERT_NE(rank(), ws() - 1) << "deliberate ASSERT failure before a collective";
  EXPECT_THROW(dist::all_reduce(t, ReduceOp::Sum, comm()), TimeoutError);
}

}  // namespace
}  // namespace sxd
