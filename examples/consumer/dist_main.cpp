// Uses the installed distributed layer: an all-reduce over MPI_COMM_WORLD and
// an MoE dispatch + combine (run it alone, as a singleton, or under mpirun).
#include <cstdio>

#include "dist/dist.h"
#include "dist/moe.h"
#include "dist/mpi_info.h"

int main() {
  namespace sxd = scatterx::dist;
  sxd::Communicator world = sxd::Communicator::world();
  scatterx::Tensor x = scatterx::Tensor::empty({3}, scatterx::DType::Int64);
  for (int i = 0; i < 3; ++i) x.data_as<int64_t>()[i] = world.rank() + i;
  sxd::all_reduce(x, sxd::ReduceOp::Sum, world);
  const int64_t n = world.size();
  bool ok = sxd::mpi_info().initialized;  // the environment report's header and rows are installed too
  for (int i = 0; i < 3; ++i) ok = ok && x.data_as<int64_t>()[i] == n * (n - 1) / 2 + n * i;
  // Two tokens, each to expert (rank + 1) % n with weight 0.5; identity experts: y = x / 2.
  scatterx::Tensor tokens = scatterx::Tensor::empty({2, 4}, scatterx::DType::Float64);
  scatterx::Tensor idx = scatterx::Tensor::empty({2, 1}, scatterx::DType::Int64);
  scatterx::Tensor w = scatterx::Tensor::empty({2, 1}, scatterx::DType::Float64);
  for (int i = 0; i < 8; ++i) tokens.data_as<double>()[i] = world.rank() * 8 + i;
  for (int i = 0; i < 2; ++i) idx.data_as<int64_t>()[i] = (world.rank() + 1) % n;
  for (int i = 0; i < 2; ++i) w.data_as<double>()[i] = 0.5;
  sxd::MoeDispatch d = sxd::moe_dispatch(tokens, idx, w, n, world);
  scatterx::Tensor y = sxd::moe_combine(d.recv_x, *d.handle);
  for (int i = 0; i < 8; ++i) ok = ok && y.data_as<double>()[i] == tokens.data_as<double>()[i] / 2;
  std::printf("scatterx::dist from the installed package: all_reduce and moe over %d rank(s) %s\n", world.size(),
              ok ? "OK" : "WRONG");
  return ok ? 0 : 1;
}
