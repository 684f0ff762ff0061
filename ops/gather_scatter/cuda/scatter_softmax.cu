// CUDA scatter_softmax / scatter_log_softmax over grouped rows.
//
// One thread owns one output column (group t, feature k) and makes the CPU
// kernel's three passes over the group's rows in position order: the maximum
// m (torch's amax: NaN wins), the sum s of exp(x - m), then each output. The
// threads of a block take consecutive features of one group, so for F >= 32
// a warp reads contiguous row pieces; for F == 1 (attention scores) each
// thread walks its own group. Every column is folded by one thread in a
// fixed order: deterministic. The arithmetic is scatter_softmax.h's, with
// CUDA's expf / exp / logf / log in place of the CPU's (within a few ulp), so
// results agree with the CPU within rounding.
#include <cstdint>
#include <type_traits>

#include "ops/dispatch.h"
#include "ops/gather_scatter/cuda/gather_scatter_cuda.h"
#include "ops/reduce_ops.h"
#include "ops/runtime/cuda/common.cuh"

namespace scatterx::detail::cuda {

namespace {

// CUDA's math library (expf / logf within 2 / 1 ulp, exp / log within 1),
// named from the global namespace so no scatterx name can stand in.
template <typename A>
__device__ __forceinline__ A exp_of(A x) {
  if constexpr (std::is_same_v<A, float>) {
    return ::expf(x);
  } else {
    return ::exp(x);
  }
}

template <typename A>
__device__ __forceinline__ A log_of(A x) {
  if constexpr (std::is_same_v<A, float>) {
    return ::logf(x);
  } else {
    return ::log(x);
  }
}

// Column u = (group u / F, feature u % F); rows are order[offsets[t] ..
// offsets[t + 1]) of the contiguous [positions, F] src and out.
template <typename T, bool kLog>
__global__ void softmax_columns(T* out, const T* src, const int64_t* offsets, const int64_t* order, int64_t features,
                                int64_t columns, acc_t<T> eps) {
  using A = acc_t<T>;
  using Max = ReduceOp<Reduce::Amax, A>;
  SCATTERX_GRID_LOOP(u, columns) {
    const int64_t group = u / features;
    const int64_t k = u % features;
    const int64_t begin = offsets[group];
    const int64_t end = offsets[group + 1];
    A m = Max::identity();
    for (int64_t p = begin; p < end; ++p) m = Max::combine(m, static_cast<A>(src[order[p] * features + k]));
    A s = A(0);
    for (int64_t p = begin; p < end; ++p) s += exp_of(static_cast<A>(src[order[p] * features + k]) - m);
    if constexpr (kLog) {
      const A log_s = log_of(s + eps);
      for (int64_t p = begin; p < end; ++p) {
        const int64_t at = order[p] * features + k;
        out[at] = static_cast<T>((static_cast<A>(src[at]) - m) - log_s);
      }
    } else {
      for (int64_t p = begin; p < end; ++p) {
        const int64_t at = order[p] * features + k;
        out[at] = static_cast<T>(exp_of(static_cast<A>(src[at]) - m) / s);
      }
    }
  }
}

}  // namespace

void scatter_softmax(const char* op, const TensorView& src, const DeviceGroups& groups, const TensorView& out, bool log,
                     double eps) {
  DeviceGuard guard(out.device(), op);
  const int64_t features = src.size(1);
  const int64_t columns = groups.num_groups * features;
  if (columns == 0) return;
  dispatch_dtype(src.dtype(), op, [&](auto dtype_tag) {
    constexpr DType D = decltype(dtype_tag)::value;
    if constexpr (is_floating_point(D)) {
      using T = CppType<D>;
      using A = acc_t<T>;
      auto* o = static_cast<T*>(out.data());
      const auto* x = static_cast<const T*>(src.data());
      const A e = static_cast<A>(eps);
      if (log) {
        softmax_columns<T, true>
            <<<blocks_for(columns), kThreads, 0, stream()>>>(o, x, groups.offsets, groups.order, features, columns, e);
      } else {
        softmax_columns<T, false>
            <<<blocks_for(columns), kThreads, 0, stream()>>>(o, x, groups.offsets, groups.order, features, columns, e);
      }
      check_launch(op, "softmax_columns");
    }
  });
}

}  // namespace scatterx::detail::cuda
