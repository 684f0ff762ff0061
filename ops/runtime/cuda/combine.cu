// Element-wise folds of two device buffers (combine.h's contract on the
// GPU): the distributed layer reduces received chunks with them.
#include "ops/dispatch.h"
#include "ops/reduce_ops.h"
#include "ops/runtime/cuda/common.cuh"
#include "ops/runtime/cuda/runtime.h"

namespace scatterx::detail::cuda {

namespace {

// count > 0 finalizes (the mean's division); the same arithmetic as
// combine_cpu, element by element, so both devices give the same bits.
template <Reduce R, typename T>
__global__ void combine_kernel(T* out, const T* a, const T* b, int64_t n, int64_t count) {
  using A = acc_t<T>;
  using Op = ReduceOp<R, A>;
  SCATTERX_GRID_LOOP(i, n) {
    const A folded = Op::combine(static_cast<A>(a[i]), static_cast<A>(b[i]));
    out[i] = static_cast<T>(count > 0 ? Op::finalize(folded, count) : folded);
  }
}

template <typename T>
__global__ void finalize_mean_kernel(T* out, int64_t n, int64_t count) {
  using A = acc_t<T>;
  SCATTERX_GRID_LOOP(i, n) {
    out[i] = static_cast<T>(ReduceOp<Reduce::Mean, A>::finalize(static_cast<A>(out[i]), count));
  }
}

}  // namespace

void combine(void* out, const void* a, const void* b, int64_t n, DType dtype, Reduce reduce, int64_t count,
             const char* op) {
  dispatch_fold(dtype, reduce, op, [&](auto dtype_tag, auto reduce_tag) {
    using T = CppType<decltype(dtype_tag)::value>;
    if (n == 0) return;
    combine_kernel<decltype(reduce_tag)::value, T><<<blocks_for(n), kThreads, 0, stream()>>>(
        static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b), n, count);
    check_launch(op, "combine_kernel");
  });
}

void finalize_mean(void* out, int64_t n, DType dtype, int64_t count, const char* op) {
  SCATTERX_CHECK(reduce_supported(Reduce::Mean, dtype), DTypeError, op, "avg is not supported for dtype ",
                 dtype_name(dtype));
  if (n == 0) return;
  dispatch_dtype(dtype, op, [&](auto dtype_tag) {
    using T = CppType<decltype(dtype_tag)::value>;
    if constexpr (reduce_supported(Reduce::Mean, decltype(dtype_tag)::value)) {
      finalize_mean_kernel<T><<<blocks_for(n), kThreads, 0, stream()>>>(static_cast<T*>(out), n, count);
      check_launch(op, "finalize_mean_kernel");
    }
  });
}

}  // namespace scatterx::detail::cuda
