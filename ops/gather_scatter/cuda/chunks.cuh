// Internal: how a long group of DeviceGroups (gather_scatter_cuda.h) is cut
// into chunks, shared by the grouping that counts the chunks and the kernels
// that fold them.
#pragma once

#include <cstdint>

#include "ops/macros.h"

namespace scatterx::detail::cuda {

// What the kernels read of DeviceGroups (device pointers).
struct DeviceGroupsView {
  int64_t num_groups;
  const int64_t* offsets;
  const int64_t* chunk_offsets;
  const int64_t* order;
};

// Groups of up to this many positions are folded by one thread, in position
// order (the CPU backend's order, so those results match it bit for bit).
constexpr int64_t kSerialGroup = 64;

// A longer group of n positions is cut into chunks of about sqrt(n) (at least
// kSerialGroup): a thread then folds one chunk, and another the chunks'
// results, so neither walks more than about 2 sqrt(n) values.
SCATTERX_HOST_DEVICE inline int64_t chunk_length(int64_t n) {
  int64_t root = kSerialGroup;
  while (root * root < n) root *= 2;
  return root;
}

SCATTERX_HOST_DEVICE inline int64_t chunks_of(int64_t n) {
  if (n <= kSerialGroup) return 0;
  const int64_t length = chunk_length(n);
  return (n + length - 1) / length;
}

// The group holding item u of a list cut at starts[0 .. count] (starts[0] ==
// 0, non-decreasing): the last g with starts[g] <= u. Empty groups share their
// start with the next group and are never returned.
SCATTERX_HOST_DEVICE inline int64_t group_of(const int64_t* starts, int64_t count, int64_t u) {
  int64_t lo = 0;
  int64_t hi = count;  // starts[hi] > u is assumed for hi == count
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (starts[mid] <= u)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// Where chunk c (of all the groups' chunks, numbered by chunk_offsets) lies:
// its group and its slots [begin, end) among the grouped positions.
struct ChunkSlots {
  int64_t group;
  int64_t begin;
  int64_t end;
};
SCATTERX_HOST_DEVICE inline ChunkSlots chunk_slots(const int64_t* offsets, const int64_t* chunk_offsets,
                                                   int64_t num_groups, int64_t c) {
  const int64_t group = group_of(chunk_offsets, num_groups, c);
  const int64_t length = chunk_length(offsets[group + 1] - offsets[group]);
  const int64_t begin = offsets[group] + (c - chunk_offsets[group]) * length;
  const int64_t end = begin + length < offsets[group + 1] ? begin + length : offsets[group + 1];
  return {group, begin, end};
}

}  // namespace scatterx::detail::cuda
