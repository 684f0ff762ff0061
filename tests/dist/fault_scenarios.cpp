// Process-level faults, one mpirun job per scenario (fault_scenario.sh runs
// them, bounds their time and looks for leftover processes):
//
//   scatterx_dist_fault_scenarios sigkill-mid [MiB]
//       after a barrier every rank starts a sum all_reduce of MiB (default
//       256) float32; the last rank kills itself with SIGKILL from a helper
//       thread 50 ms later, in the middle of it.
//   scatterx_dist_fault_scenarios sigkill-before
//       the last rank kills itself after the barrier, before the all_reduce
//       the others enter.
//   scatterx_dist_fault_scenarios exit-without-destroy
//       every rank queues async all_reduces on a communicator it never
//       destroys (leaked, and one more in static storage) and returns from
//       main without waiting: the job must exit 0.
//   scatterx_dist_fault_scenarios exit-with-stuck-work
//       as above, but rank 0's queued all_reduce is one the others never
//       join: rank 0's exit waits for it to time out (SCATTERX_DIST_TIMEOUT),
//       then the job exits 0.
//
// Each survivor prints what its all_reduce did ("returned", or the error);
// under mpirun (Open MPI 4.1) the job is normally torn down before that.
// Under mpirun --enable-recovery the survivors run on and must raise
// TimeoutError after SCATTERX_DIST_TIMEOUT; they then do what an
// application would, MPI_Abort.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "dist/dist.h"

namespace dist = scatterx::dist;
using scatterx::DType;
using scatterx::Tensor;

namespace {

int sigkill(const std::string& scenario, int64_t mib) {
  dist::Communicator world = dist::Communicator::world();
  const int rank = world.rank();
  const int victim = world.size() - 1;
  Tensor t = Tensor::zeros({mib * (1 << 20) / 4}, DType::Float32);
  dist::barrier(world);
  std::thread killer;
  if (rank == victim) {
    std::printf("%s: rank %d kills itself with SIGKILL\n", scenario.c_str(), rank);
    std::fflush(stdout);
    if (scenario == "sigkill-before") raise(SIGKILL);
    killer = std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      raise(SIGKILL);
    });
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    dist::all_reduce(t, dist::ReduceOp::Sum, world);
    std::printf("%s: rank %d: all_reduce returned\n", scenario.c_str(), rank);
  } catch (const dist::TimeoutError& e) {
    std::printf("%s: rank %d: all_reduce raised TimeoutError after %.1f s: %s\n", scenario.c_str(), rank,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), e.what());
    std::fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 3);
  } catch (const std::exception& e) {
    std::printf("%s: rank %d: all_reduce raised after %.1f s: %s\n", scenario.c_str(), rank,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), e.what());
  }
  std::fflush(stdout);
  if (killer.joinable()) killer.join();
  return 3;  // a survivor reaching here fails the job too
}

int exit_without_destroy(bool stuck) {
  static dist::Communicator in_static_storage = dist::Communicator::world();
  auto* leaked = new dist::Communicator(dist::Communicator::world());
  for (const dist::Communicator* c : {leaked, &in_static_storage}) {
    for (int k = 0; k < (stuck ? (c->rank() == 0 ? 1 : 0) : 4); ++k) {
      auto* t = new Tensor(Tensor::zeros({1 << 20}, DType::Float32));  // alive until exit, as the Work needs
      dist::all_reduce_async(*t, dist::ReduceOp::Sum, *c);
    }
  }
  std::printf("%s: rank %d leaves main\n", stuck ? "exit-with-stuck-work" : "exit-without-destroy", leaked->rank());
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  if (scenario == "sigkill-mid" || scenario == "sigkill-before") {
    return sigkill(scenario, argc > 2 ? std::atoll(argv[2]) : 256);
  }
  if (scenario == "exit-without-destroy" || scenario == "exit-with-stuck-work") {
    return exit_without_destroy(scenario == "exit-with-stuck-work");
  }
  std::fprintf(stderr, "usage: %s sigkill-mid [MiB] | sigkill-before | exit-without-destroy | exit-with-stuck-work\n",
               argv[0]);
  return 2;
}
