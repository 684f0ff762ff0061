// CUDA index bounds check: one pass over the index finds the first value
// (row-major) outside [0, bound); the host turns it into the CPU backend's
// IndexError before any kernel writes. For scatters that may take the
// atomic path, the same pass measures contention (contention.h): how many
// index values equal each of a few values sampled from the index, read back
// with the bounds flag, so it costs no extra synchronization.
#include <cooperative_groups.h>

#include <algorithm>
#include <limits>

#include "ops/cuda.h"
#include "ops/detail/cuda/contention.h"
#include "ops/detail/cuda/index_check.h"
#include "ops/detail/strided.h"
#include "ops/dispatch.h"
#include "ops/runtime/cuda/common.cuh"
#include "ops/runtime/cuda/runtime.h"

namespace scatterx::detail::cuda {

namespace {

namespace cg = cooperative_groups;

// Values sampled from the index: a value drawing a share p of the index is
// missed with probability about (1 - p)^kSamples (0.3% at p = 1/6).
constexpr int kSamples = 32;

struct CheckResult {  // what the host reads back, in one copy
  unsigned long long first_bad;
  unsigned long long hits[kSamples];
};

// One value from each of kSamples equal strata of the index, at a
// pseudo-random place in it (evenly spaced picks would miss a value that
// recurs with the index's period, as top-k routing's do), sorted. One thread.
template <typename I>
__global__ void pick_samples(const I* index, const StridedLayout<1> layout, int64_t total, long long* samples) {
  for (int s = 0; s < kSamples; ++s) {
    const int64_t begin = total * s / kSamples;
    const int64_t end = total * (s + 1) / kSamples;
    const int64_t width = end > begin ? end - begin : 1;
    uint64_t h = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(s + 1);
    h ^= h >> 29;
    int64_t off[1];
    const int64_t at = begin + static_cast<int64_t>(h % static_cast<uint64_t>(width));
    layout.offsets(at < total ? at : total - 1, off);
    samples[s] = static_cast<long long>(index[off[0]]);
  }
  for (int s = 1; s < kSamples; ++s) {
    const long long v = samples[s];
    int t = s;
    for (; t > 0 && samples[t - 1] > v; --t) samples[t] = samples[t - 1];
    samples[t] = v;
  }
}

template <typename I, bool kProfile>
__global__ void check_index(const I* index, const StridedLayout<1> layout, int64_t total, int64_t bound,
                            const long long* samples, CheckResult* result) {
  __shared__ long long sampled[kSamples];
  __shared__ unsigned long long hits[kSamples];
  if constexpr (kProfile) {
    if (threadIdx.x < kSamples) {
      sampled[threadIdx.x] = samples[threadIdx.x];
      hits[threadIdx.x] = 0;
    }
    __syncthreads();
  }
  SCATTERX_GRID_LOOP(u, total) {
    int64_t off[1];
    layout.offsets(u, off);
    const int64_t v = static_cast<int64_t>(index[off[0]]);
    if (v < 0 || v >= bound) atomicMin(&result->first_bad, static_cast<unsigned long long>(u));
    if constexpr (kProfile) {
      int lo = 0;  // lower bound of v among the sorted samples
      for (int half = kSamples / 2; half > 0; half /= 2) {
        if (sampled[lo + half - 1] < v) lo += half;
      }
      if (sampled[lo] == v) {
        // Threads counting the same sample add once between them: a value
        // that fills whole warps costs one shared atomic per warp.
        const cg::coalesced_group matched = cg::coalesced_threads();
        const cg::coalesced_group same = cg::labeled_partition(matched, lo);
        if (same.thread_rank() == 0) atomicAdd(&hits[lo], static_cast<unsigned long long>(same.size()));
      }
    }
  }
  if constexpr (kProfile) {
    __syncthreads();
    if (threadIdx.x < kSamples && hits[threadIdx.x] != 0) atomicAdd(&result->hits[threadIdx.x], hits[threadIdx.x]);
  }
}

}  // namespace

double check_index_bounds(const char* op, const TensorView& index, int64_t dim, int64_t bound,
                          bool measure_contention) {
  const int64_t total = index.numel();
  if (total == 0 || !scatterx::cuda::index_checks()) return -1;
  measure_contention = measure_contention && measures_contention();
  DeviceGuard guard(index.device(), op);
  // Dims of stride 0 repeat values (an expanded index): only the others are
  // walked. The first bad position in that walk, with 0 in the skipped dims,
  // is also the first in row-major order over the whole shape.
  const Shape& shape = index.sizes();
  StridedLayout<1> layout;
  Shape walked_dims;
  for (int64_t d = 0; d < shape.size(); ++d) {
    if (index.strides()[d] == 0 && shape[d] > 1) continue;
    const int64_t stride[1] = {index.strides()[d]};
    layout.push(shape[d], stride);
    walked_dims.push_back(d);
  }
  const int64_t walked = layout.numel();
  std::shared_ptr<void> scratch = allocate(sizeof(CheckResult) + kSamples * sizeof(long long), index.device(), op);
  auto* result = static_cast<CheckResult*>(scratch.get());
  auto* samples = reinterpret_cast<long long*>(result + 1);
  check(cudaMemsetAsync(result, 0, sizeof(CheckResult), stream()), op, "cudaMemsetAsync");
  check(cudaMemsetAsync(&result->first_bad, 0xff, sizeof result->first_bad, stream()), op, "cudaMemsetAsync");
  dispatch_index_dtype(index.dtype(), op, [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* data = static_cast<const I*>(index.data());
    if (measure_contention) {
      pick_samples<I><<<1, 1, 0, stream()>>>(data, layout, walked, samples);
      check_launch(op, "pick_samples");
      check_index<I, true><<<blocks_for(walked), kThreads, 0, stream()>>>(data, layout, walked, bound, samples, result);
    } else {
      check_index<I, false>
          <<<blocks_for(walked), kThreads, 0, stream()>>>(data, layout, walked, bound, samples, result);
    }
    check_launch(op, "check_index");
  });
  CheckResult found{};
  copy_to_host(&found, result, sizeof found, op);
  if (found.first_bad == std::numeric_limits<unsigned long long>::max()) {
    if (!measure_contention) return -1;
    const unsigned long long hottest = *std::max_element(found.hits, found.hits + kSamples);
    return static_cast<double>(hottest) / static_cast<double>(walked);
  }
  // Read the bad value back and name its position, as the CPU check does.
  int64_t off[1];
  layout.offsets(static_cast<int64_t>(found.first_bad), off);
  int64_t value = 0;
  dispatch_index_dtype(index.dtype(), op, [&](auto tag) {
    using I = typename decltype(tag)::type;
    I v{};
    copy_to_host(&v, static_cast<const I*>(index.data()) + off[0], sizeof(I), op);
    value = static_cast<int64_t>(v);
  });
  Shape position = shape;
  for (int64_t d = 0; d < shape.size(); ++d) position[d] = 0;
  int64_t rest = static_cast<int64_t>(found.first_bad);
  for (int64_t w = walked_dims.size() - 1; w >= 0; --w) {
    position[walked_dims[w]] = rest % layout.sizes[w];
    rest /= layout.sizes[w];
  }
  raise<IndexError>(op, "index ", value, " is out of bounds for dimension ", dim, " with size ", bound,
                    " (index position ", position.str(), ")");
}

}  // namespace scatterx::detail::cuda
