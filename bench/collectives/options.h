// The command line of scatterx_bench_collectives: its options with their
// defaults, and the usage text that --help prints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/dtype.h"
#include "world.h"

namespace scatterx_bench_collectives {

struct Options {
  int64_t min_bytes = kKiB;
  int64_t max_bytes = 64 * kMiB;
  int64_t factor = 4;
  int iters = 0;  // 0: by size
  int warmup = 5;
  scatterx::DType dtype = scatterx::DType::Float32;
  std::vector<std::string> ops{"reduce_scatter", "all_gather", "all_reduce", "all_to_all_v", "all_to_all_single"};
  std::string markdown;
  std::string json;  // --json FILE: the rows in the format of python_bindings/scatterx/bench/results.py
  bool strict = false;
  int retries = 2;
  double noisy = 0.10;
  double timeout_s = 60;
};

// Reads argv. --help prints the usage and exits 0; a bad argument prints the
// error and the usage (on rank 0) and exits 2, on every rank, after
// MPI_Finalize.
Options parse_options(int argc, char** argv);

// "64M", "1.5K", "4096": bytes (the suffixes K, M, G are KiB, MiB, GiB; B, KB,
// KiB, ... are read too, in any case). An unreadable or non-positive size is a
// usage error.
int64_t parse_bytes(const std::string& text);

// An op's name as the report writes it ("alltoallv" -> "all_to_all_v"); an
// unknown name is a usage error.
std::string canonical_op(const std::string& name);

}  // namespace scatterx_bench_collectives
