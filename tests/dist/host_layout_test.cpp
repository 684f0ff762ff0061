// Which path the reduce-scatter takes for a layout of ranks over hosts: the
// shared-memory segment only when every rank of the communicator is on one
// host, the point-to-point ring (the network path) otherwise.
//
// The expectation comes from the hostnames (MPI_Get_processor_name), the
// library's verdict from MPI's view of the nodes (MPI_COMM_TYPE_SHARED):
// two independent sources. On one machine every rank has the same hostname;
// under scripts/multihost.sh each simulated host has its own, and the script
// sets SCATTERX_TEST_HOSTS to the number of hosts so that this test also
// checks the layout is the one asked for (not one host by mistake).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "ops/runtime/knobs.h"
#include "tests/dist/dist_test_util.h"

namespace sxd {
namespace {

namespace dist = scatterx::dist;
namespace detail = scatterx::detail;

class HostLayoutTest : public DistTest {};

// Every rank's hostname, by rank (through plain MPI, not the library).
std::vector<std::string> hostnames() {
  char mine[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(mine, &length);
  int ws = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &ws);
  std::vector<char> all(static_cast<size_t>(ws) * MPI_MAX_PROCESSOR_NAME);
  MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD);
  std::vector<std::string> names;
  for (int r = 0; r < ws; ++r) names.emplace_back(&all[static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME]);
  return names;
}

// A sum reduce-scatter with 128 KiB blocks (above kShmMinBlockBytes, so the
// segment is tried) on `c`, its result checked; returns the path it took.
std::optional<bool> reduce_scatter_path(const Communicator& c) {
  const int64_t n = 32768;  // float32: 128 KiB per block
  const int ws = c.size();
  const int rank = c.rank();
  Tensor input =
      make({ws * n}, DType::Float32, [&](int64_t i) { return reduce_input(ReduceOp::Sum, DType::Float32, rank, i); });
  Tensor output = Tensor::zeros({n}, DType::Float32);
  dist::reduce_scatter_tensor(output, input, ReduceOp::Sum, c);
  EXPECT_TRUE(holds(
      output, [&](int64_t i) { return reduce_expected(ReduceOp::Sum, DType::Float32, iota_ranks(ws), rank * n + i); }))
      << "on a communicator of " << ws << " ranks";
  return c.shared_memory_path();
}

TEST_F(HostLayoutTest, SharedMemoryOnlyWhenTheCommunicatorIsOnOneHost) {
  SXD_REQUIRE_WS2();
  if (detail::knob_choice(detail::Knob::DistEmulateDevice) != "off") {
    GTEST_SKIP() << "the emulated device paths do not use the host segment";
  }
  const std::vector<std::string> names = hostnames();
  std::vector<std::string> hosts = names;
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  if (const char* asked = std::getenv("SCATTERX_TEST_HOSTS")) {
    ASSERT_EQ(static_cast<int>(hosts.size()), std::atoi(asked)) << "hosts seen, against those asked for";
  }
  // The segment serves at most 8 ranks and can be turned off.
  const bool shm_on = comm().options().shared_memory.value();
  auto expected = [&](const Communicator& c, bool one_host) { return shm_on && one_host && c.size() <= 8; };

  // The whole world: the segment only if it is on one host. Single copy is
  // off, since on one host it serves these reduce-scatters without the
  // segment.
  dist::CommunicatorOptions no_single_copy;
  no_single_copy.single_copy = false;
  const Communicator everyone = comm().split(0, rank(), no_single_copy);
  EXPECT_EQ(reduce_scatter_path(everyone), std::optional<bool>(expected(everyone, hosts.size() == 1)))
      << "world of " << ws() << " ranks on " << hosts.size() << " host(s)";

  // The ranks of each host by themselves: the segment, whatever the other
  // hosts (with one rank on a host there is no reduce-scatter to make).
  const int host =
      static_cast<int>(std::find(hosts.begin(), hosts.end(), names[static_cast<size_t>(rank())]) - hosts.begin());
  const Communicator local = comm().split(host, rank(), no_single_copy);
  if (local.size() > 1) {
    EXPECT_EQ(reduce_scatter_path(local), std::optional<bool>(expected(local, true)))
        << local.size() << " ranks of host " << names[static_cast<size_t>(rank())];
  } else {
    EXPECT_EQ(local.shared_memory_path(), std::nullopt) << "one rank decides nothing";
  }
}

// A 256 KiB-per-rank all_gather_into_tensor on `c` (above the single-copy
// switch point), its result checked; returns the path it took.
std::optional<bool> all_gather_path(const Communicator& c) {
  const int64_t n = 65536;  // int32
  Tensor input = make({n}, DType::Int32, [&](int64_t i) { return plain_value(DType::Int32, c.rank(), i); });
  Tensor output = Tensor::zeros({c.size() * n}, DType::Int32);
  dist::all_gather_into_tensor(output, input, c);
  EXPECT_TRUE(holds(output, [&](int64_t i) { return plain_value(DType::Int32, static_cast<int>(i / n), i % n); }))
      << "on a communicator of " << c.size() << " ranks";
  return c.single_copy_path();
}

// The single-copy path likewise: only when every rank of the communicator
// is on one host (processes of other hosts are not readable, and under
// multihost.sh may even share a process namespace with this one).
TEST_F(HostLayoutTest, SingleCopyOnlyWhenTheCommunicatorIsOnOneHost) {
  SXD_REQUIRE_WS2();
  if (detail::knob_choice(detail::Knob::DistEmulateDevice) != "off") {
    GTEST_SKIP() << "the emulated device paths do not use the host transport";
  }
  const std::vector<std::string> names = hostnames();
  std::vector<std::string> hosts = names;
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  const bool on = comm().options().single_copy.value();
  const Communicator everyone = comm().split(0, rank());
  EXPECT_EQ(all_gather_path(everyone), std::optional<bool>(on && hosts.size() == 1))
      << "world of " << ws() << " ranks on " << hosts.size() << " host(s)";
  const int host =
      static_cast<int>(std::find(hosts.begin(), hosts.end(), names[static_cast<size_t>(rank())]) - hosts.begin());
  const Communicator local = comm().split(host, rank());
  if (local.size() > 1) {
    EXPECT_EQ(all_gather_path(local), std::optional<bool>(on))
        << local.size() << " ranks of host " << names[static_cast<size_t>(rank())];
  }
}

}  // namespace
}  // namespace sxd
