// Communicators from an application's MPI communicator (C handle, Fortran
// handle, from_mpi), and the lifetime of a communicator's state.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>  // before dist.h: enables scatterx::dist::from_mpi
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <gtest/gtest.h>

#include <vector>

#include "tests/dist/dist_test_util.h"

namespace sxd {
namespace {

namespace dist = scatterx::dist;

class InteropTest : public DistTest {
 protected:
  // A sum over `c` of (rank in c + 1): checks c is a working communicator of
  // `size` ranks.
  void expect_working(const Communicator& c, int size) {
    ASSERT_TRUE(c.valid());
    ASSERT_EQ(c.size(), size);
    Tensor t = make({3}, DType::Int64, [&](int64_t i) { return V{static_cast<double>(c.rank() + 1 + i), 0}; });
    dist::all_reduce(t, ReduceOp::Sum, c);
    EXPECT_TRUE(holds(t, [&](int64_t i) { return V{static_cast<double>(size * (size + 1) / 2 + size * i), 0}; }));
  }
};

// The transport of CUDA tensors follows what the loaded MPI library says at
// run time (Open MPI's extension), and is false for MPIs without one.
TEST_F(InteropTest, CudaAwarenessFromTheMpiLibrary) {
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
  EXPECT_EQ(dist::mpi_cuda_aware(), MPIX_Query_cuda_support() == 1);
#else
  EXPECT_FALSE(dist::mpi_cuda_aware());
#endif
}

TEST_F(InteropTest, FromMpi) {
  Communicator c = dist::from_mpi(MPI_COMM_WORLD);
  EXPECT_EQ(c.rank(), rank());
  expect_working(c, ws());
}

TEST_F(InteropTest, FromCHandle) {
  MPI_Comm world_comm = MPI_COMM_WORLD;
  Communicator c = Communicator::from_c_handle(&world_comm, sizeof(world_comm));
  EXPECT_EQ(c.rank(), rank());
  expect_working(c, ws());
  const std::string msg =
      error_message<ArgumentError>([&] { Communicator::from_c_handle(&world_comm, sizeof(world_comm) + 1); });
  EXPECT_TRUE(mentions(msg, {"from_c_handle", "size"}));
}

TEST_F(InteropTest, FromFortranHandle) {
  Communicator c = Communicator::from_fortran_handle(static_cast<int64_t>(MPI_Comm_c2f(MPI_COMM_WORLD)));
  EXPECT_EQ(c.rank(), rank());
  expect_working(c, ws());
}

// An application's split communicator: the library's duplicate works, and
// the application may free its own handle right away.
TEST_F(InteropTest, ApplicationSplitCommunicator) {
  MPI_Comm app = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, rank() % 2, -rank(), &app), MPI_SUCCESS);
  Communicator c = dist::from_mpi(app);
  MPI_Comm_free(&app);
  int expected_size = 0;
  for (int r = rank() % 2; r < ws(); r += 2) ++expected_size;
  // key -rank: descending world rank
  EXPECT_EQ(c.rank(), (expected_size - 1) - rank() / 2);
  expect_working(c, expected_size);
}

// The library's collectives and the application's own MPI calls on the same
// underlying communicator do not interfere (the library works on a dup).
TEST_F(InteropTest, MixedWithApplicationMpi) {
  Communicator c = dist::from_mpi(MPI_COMM_WORLD);
  Tensor t = make({100}, DType::Float64, [&](int64_t i) { return V{static_cast<double>(rank() * 100 + i), 0}; });
  Work w = dist::all_reduce_async(t, ReduceOp::Max, c);
  int mine = rank() + 1, total = 0;
  MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  w.wait();
  EXPECT_EQ(total, ws() * (ws() + 1) / 2);
  EXPECT_TRUE(holds(t, [&](int64_t i) { return V{static_cast<double>((ws() - 1) * 100 + i), 0}; }));
}

// Work outlives the Communicator object it was started on (copies of the
// communicator keep its state alive until the collective ran).
TEST_F(InteropTest, WorkOutlivesCommunicatorObject) {
  Tensor t = make({1 << 16}, DType::Int32, [&](int64_t i) { return V{static_cast<double>(rank() + i % 100), 0}; });
  Tensor u = make({7}, DType::Int32, [&](int64_t i) { return V{static_cast<double>(i), 0}; });
  Work w1, w2;
  {
    Communicator c = comm().split(0, rank());
    w1 = dist::all_reduce_async(t, ReduceOp::Sum, c);
    w2 = dist::broadcast_async(u, ws() - 1, c);
  }
  w2.wait();
  w1.wait();
  EXPECT_TRUE(holds(t, [&](int64_t i) { return V{static_cast<double>(ws() * (ws() - 1) / 2 + ws() * (i % 100)), 0}; }));
  EXPECT_TRUE(holds(u, [&](int64_t i) { return V{static_cast<double>(i), 0}; }));
}

}  // namespace
}  // namespace sxd
