// The cases: one op at one size, with its buffers, its timed scatterx and
// native MPI calls, and its result check. The pairs are listed at the top of
// main.cpp; make_case builds any of them.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "check.h"
#include "dist/dist.h"
#include "mpi_types.h"
#include "ops/tensor.h"

namespace scatterx_bench_collectives {

struct Case {
  std::string op;
  int64_t bytes = 0;  // nccl-tests' size
  int64_t count = 0;
  double bus_factor = 1;
  bool exact = true;
  std::function<void()> sx;     // timed
  std::function<void()> mpi;    // timed
  std::function<void()> reset;  // before every call, untimed (may be empty)
  std::function<void(Check&)> verify;
  std::shared_ptr<void> keep;  // the buffers
};

// What every case runs on. The cases keep a pointer to it: it must outlive them and stay put.
struct Env {
  explicit Env(scatterx::dist::Communicator c) : comm(std::move(c)) {}
  scatterx::dist::Communicator comm;
  MPI_Comm native = MPI_COMM_NULL;
  MpiTypes types;
  scatterx::DType dtype = scatterx::DType::Float32;
  int64_t esize = 4;
};

// Runs fn with the communicator's cross-rank checks on; records a scatterx error in c instead of throwing.
void checked_call(Env& env, Check& c, const std::function<void()>& fn);

// The case of `op` (a canonical name) at series size `size`, rounded down to what its shapes allow.
Case make_case(Env& env, const std::string& op, int64_t size);

}  // namespace scatterx_bench_collectives
