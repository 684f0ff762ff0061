// main of scatterx_dist_tests: run it under mpirun, e.g.
//   mpirun -np 4 --oversubscribe build/tests/dist/scatterx_dist_tests
//
// MPI is initialized by the library (Communicator::ensure_mpi_initialized,
// MPI_THREAD_MULTIPLE) and finalized by it at exit. Rank 0 prints gtest's
// usual report; the other ranks print only their failures, prefixed with
// "[rank N]". Each rank exits with RUN_ALL_TESTS()'s status, so a failure on
// any rank fails mpirun; DistTest::TearDown also marks a test failed on every
// rank when it failed on one (see dist_test_util.h).
//
// A collective that a failing rank skipped makes its peers wait; the world
// communicator's timeout (SCATTERX_DIST_TIMEOUT, 60 s under ctest) turns
// that wait into a TimeoutError instead of a hang, and ctest's TIMEOUT
// bounds the rest.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "tests/dist/dist_test_util.h"

namespace sxd {
namespace {

MPI_Comm g_harness = MPI_COMM_NULL;

// Prints failures (only) of a rank other than 0.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}

  void OnTestStart(const ::testing::TestInfo& info) override {
    // (UnitTest::current_test_info() would deadlock inside OnTestPartResult:
    // gtest holds its mutex while it reports a result.)
    current_ = std::string(info.test_suite_name()) + "." + info.name();
  }
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure in %s\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "unknown", result.line_number(), current_.c_str(),
                 result.message());
    std::fflush(stderr);
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed()) {
      std::fprintf(stderr, "[rank %d] [  FAILED  ] %s.%s\n", rank_, info.test_suite_name(), info.name());
      std::fflush(stderr);
    }
    current_ = "(between tests)";
  }

 private:
  std::string current_ = "(before the first test)";
  int rank_;
};

}  // namespace

std::vector<int> harness_ranks_with(bool flag) {
  int size = 1;
  MPI_Comm_size(g_harness, &size);
  int mine = flag ? 1 : 0;
  std::vector<int> all(static_cast<size_t>(size), 0);
  MPI_Allgather(&mine, 1, MPI_INT, all.data(), 1, MPI_INT, g_harness);
  std::vector<int> ranks;
  for (int r = 0; r < size; ++r) {
    if (all[static_cast<size_t>(r)] != 0) ranks.push_back(r);
  }
  return ranks;
}

void harness_barrier() { MPI_Barrier(g_harness); }

}  // namespace sxd

int main(int argc, char** argv) {
  scatterx::dist::Communicator::ensure_mpi_initialized();
  MPI_Comm_dup(MPI_COMM_WORLD, &sxd::g_harness);
  int rank = 0;
  MPI_Comm_rank(sxd::g_harness, &rank);

  // mpirun gives the ranks a pseudo-terminal, so gtest's "auto" would colour
  // the interleaved output of several ranks (and ctest's logs); plain text
  // unless --gtest_color says otherwise.
  ::testing::GTEST_FLAG(color) = "no";
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new sxd::RankFailurePrinter(rank));
  }

  int status = 0;
  {
    auto world = std::make_unique<scatterx::dist::Communicator>(scatterx::dist::Communicator::world());
    sxd::set_world(world.get());
    status = RUN_ALL_TESTS();
    sxd::set_world(nullptr);
  }
  // Everyone is done before the communicators go (the library finalizes MPI
  // at exit).
  MPI_Barrier(sxd::g_harness);
  MPI_Comm_free(&sxd::g_harness);
  return status;
}
