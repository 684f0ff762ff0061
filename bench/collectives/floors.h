// The floors: how fast each of scatterx's collectives must be against its
// native MPI call, as the ratio of their busbw at p50 (scatterx / MPI). They
// are rows of one table, kFloors in floors.cpp (op, number of ranks, sizes, the
// ratio and why); an op, world size and size that no row covers has no floor.
#pragma once

#include <cstdint>
#include <string>

namespace scatterx_bench_collectives {

// The floor of `op` with `world_size` ranks at the series size `nominal` (the
// size asked for, before rounding to the shapes); 0 when no row applies.
double floor_for(const std::string& op, int world_size, int64_t nominal);

// Where the floors apply, in the words of the usage text and the report:
// "2 ranks" and "16 to 64 MiB". Every row has the same scope (floors.cpp
// checks it at compile time), so one phrase describes them all.
std::string floors_ranks();
std::string floors_sizes();

}  // namespace scatterx_bench_collectives
