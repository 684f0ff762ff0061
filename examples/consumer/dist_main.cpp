// Uses the installed distributed layer: an all-reduce over MPI_COMM_WORLD
// (run it alone, as a singleton, or under mpirun).
#include <cstdio>

#include "dist/dist.h"

int main() {
  namespace sxd = scatterx::dist;
  sxd::Communicator world = sxd::Communicator::world();
  scatterx::Tensor x = scatterx::Tensor::empty({3}, scatterx::DType::Int64);
  for (int i = 0; i < 3; ++i) x.data_as<int64_t>()[i] = world.rank() + i;
  sxd::all_reduce(x, sxd::ReduceOp::Sum, world);
  const int64_t n = world.size();
  bool ok = true;
  for (int i = 0; i < 3; ++i) ok = ok && x.data_as<int64_t>()[i] == n * (n - 1) / 2 + n * i;
  std::printf("scatterx::dist from the installed package: all_reduce over %d rank(s) %s\n", world.size(),
              ok ? "OK" : "WRONG");
  return ok ? 0 : 1;
}
