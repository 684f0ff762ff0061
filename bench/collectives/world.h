// The MPI world scatterx_bench_collectives runs in, and the units its sizes are
// given in. main() sets g_rank and g_ws once, right after MPI_Init; everything
// else only reads them (rank 0 prints; the cases' splits and the floors depend
// on the number of ranks).
#pragma once

#include <cstdint>

namespace scatterx_bench_collectives {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * 1024;

inline int g_rank = 0;  // this process's rank in MPI_COMM_WORLD
inline int g_ws = 1;    // the number of ranks

}  // namespace scatterx_bench_collectives
