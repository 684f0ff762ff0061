#include "ops/detail/segments.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace scatterx::detail {

namespace {

constexpr int kMaxDigitBits = 11;  // 2048 buckets: per-thread histograms stay in L1

int bit_width(uint64_t v) {
  int bits = 0;
  while (v != 0) {
    ++bits;
    v >>= 1;
  }
  return bits;
}

// [begin, end) of piece `p` when n items are cut into `pieces` near-equal pieces.
struct Piece {
  int64_t begin;
  int64_t end;
};
Piece piece_of(int64_t p, int64_t pieces, int64_t n) {
  return {piece_start(p, pieces, n), piece_start(p + 1, pieces, n)};
}

// Stable LSD radix sort of `data` by bits [32, 32 + key_bits). Returns the
// buffer (data or scratch) holding the result. The work is cut into a fixed
// number of pieces, so the result never depends on the thread count.
uint64_t* radix_sort_high_bits(uint64_t* data, uint64_t* scratch, int64_t n, int key_bits) {
  if (key_bits == 0) return data;
  const int passes = (key_bits + kMaxDigitBits - 1) / kMaxDigitBits;
  const int width = (key_bits + passes - 1) / passes;
  const int64_t buckets = int64_t{1} << width;
  const uint64_t mask = static_cast<uint64_t>(buckets - 1);
  const int nthreads = threads_for(n, kSortGrain);
  const int64_t pieces = nthreads;
  std::vector<int64_t> histograms(static_cast<size_t>(pieces * buckets));
  uint64_t* from = data;
  uint64_t* to = scratch;
  for (int pass = 0; pass < passes; ++pass) {
    const int shift = 32 + pass * width;
    for_each_piece(pieces, nthreads, [&](int64_t p) {
      const Piece piece = piece_of(p, pieces, n);
      int64_t* hist = histograms.data() + p * buckets;
      std::fill(hist, hist + buckets, 0);
      for (int64_t i = piece.begin; i < piece.end; ++i) ++hist[(from[i] >> shift) & mask];
    });
    // bucket-major, piece-minor offsets keep the sort stable
    int64_t running = 0;
    for (int64_t b = 0; b < buckets; ++b) {
      for (int64_t p = 0; p < pieces; ++p) {
        int64_t& h = histograms[p * buckets + b];
        const int64_t c = h;
        h = running;
        running += c;
      }
    }
    for_each_piece(pieces, nthreads, [&](int64_t p) {
      const Piece piece = piece_of(p, pieces, n);
      int64_t* hist = histograms.data() + p * buckets;
      for (int64_t i = piece.begin; i < piece.end; ++i) to[hist[(from[i] >> shift) & mask]++] = from[i];
    });
    std::swap(from, to);
  }
  return from;
}

// Fills groups from (target, position) pairs sorted by target then position.
template <typename Target, typename Position>
void extract_groups(int64_t n, const Target& target_of, const Position& position_of, TargetGroups& groups) {
  const int nthreads = threads_for(n, kSortGrain);
  const int64_t pieces = nthreads;
  auto starts_group = [&](int64_t i) { return i == 0 || target_of(i) != target_of(i - 1); };
  std::vector<int64_t> first_group(static_cast<size_t>(pieces) + 1, 0);
  groups.order = Buffer<int64_t>(n);
  for_each_piece(pieces, nthreads, [&](int64_t p) {
    const Piece piece = piece_of(p, pieces, n);
    int64_t local = 0;
    for (int64_t i = piece.begin; i < piece.end; ++i) {
      local += starts_group(i) ? 1 : 0;
      groups.order[i] = position_of(i);
    }
    first_group[p + 1] = local;
  });
  for (int64_t p = 0; p < pieces; ++p) first_group[p + 1] += first_group[p];
  groups.num_groups = first_group[pieces];
  groups.target = Buffer<int64_t>(groups.num_groups);
  groups.offsets = Buffer<int64_t>(groups.num_groups + 1);
  groups.offsets[groups.num_groups] = n;
  for_each_piece(pieces, nthreads, [&](int64_t p) {
    const Piece piece = piece_of(p, pieces, n);
    int64_t g = first_group[p];
    for (int64_t i = piece.begin; i < piece.end; ++i) {
      if (starts_group(i)) {
        groups.target[g] = target_of(i);
        groups.offsets[g] = i;
        ++g;
      }
    }
  });
}

}  // namespace

template <typename I>
TargetGroups group_by_target(const I* values, int64_t stride, int64_t count, int64_t num_targets) {
  TargetGroups groups;
  if (count == 0) return groups;
  if (groups_densely(count, num_targets)) {
    // Histograms no bigger than the data: one counting pass beats radix passes.
    groups.dense = true;
    groups.num_groups = num_targets;
    groups.order = Buffer<int64_t>(count);
    counting_sort_by_target(values, stride, count, num_targets, groups.offsets,
                            [&](int64_t p, int64_t slot) { groups.order[slot] = p; });
    return groups;
  }
  constexpr int64_t k32 = int64_t{1} << 32;
  if (count <= k32 && num_targets <= k32) {
    // Pack (target << 32 | position) and sort by the high half: one 8-byte
    // array, and ties keep position order because the sort is stable.
    Buffer<uint64_t> packed(count);
    Buffer<uint64_t> scratch(count);
    parallel_for(count, kSortGrain, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        packed[p] = (static_cast<uint64_t>(values[p * stride]) << 32) | static_cast<uint64_t>(p);
      }
    });
    const uint64_t* sorted =
        radix_sort_high_bits(packed.data(), scratch.data(), count, bit_width(static_cast<uint64_t>(num_targets - 1)));
    extract_groups(
        count, [&](int64_t i) { return static_cast<int64_t>(sorted[i] >> 32); },
        [&](int64_t i) { return static_cast<int64_t>(sorted[i] & 0xffffffffu); }, groups);
    return groups;
  }
  // Beyond 2^32 positions or targets: a comparison sort of explicit pairs.
  std::vector<std::pair<int64_t, int64_t>> pairs(static_cast<size_t>(count));
  for (int64_t p = 0; p < count; ++p) pairs[p] = {static_cast<int64_t>(values[p * stride]), p};
  std::sort(pairs.begin(), pairs.end());
  extract_groups(
      count, [&](int64_t i) { return pairs[i].first; }, [&](int64_t i) { return pairs[i].second; }, groups);
  return groups;
}

template TargetGroups group_by_target<int32_t>(const int32_t*, int64_t, int64_t, int64_t);
template TargetGroups group_by_target<int64_t>(const int64_t*, int64_t, int64_t, int64_t);

}  // namespace scatterx::detail
