#include "ops/runtime/combine.h"

#include "ops/dispatch.h"
#include "ops/error.h"
#include "ops/reduce_ops.h"
#include "ops/runtime/parallel.h"

namespace scatterx::detail {

namespace {

// Elements per parallel piece: below this the fork costs more than it saves.
constexpr int64_t kCombineGrain = int64_t{1} << 15;

template <Reduce R, typename T>
void combine_typed(T* out, const T* a, const T* b, int64_t n, int64_t count) {
  using A = acc_t<T>;
  using Op = ReduceOp<R, A>;
  parallel_for(n, kCombineGrain, [&](int64_t begin, int64_t end) {
    if (count > 0) {
      for (int64_t i = begin; i < end; ++i)
        out[i] = static_cast<T>(Op::finalize(Op::combine(static_cast<A>(a[i]), static_cast<A>(b[i])), count));
    } else {
      for (int64_t i = begin; i < end; ++i)
        out[i] = static_cast<T>(Op::combine(static_cast<A>(a[i]), static_cast<A>(b[i])));
    }
  });
}

}  // namespace

void combine_cpu(void* out, const void* a, const void* b, int64_t n, DType dtype, Reduce reduce, int64_t count,
                 const char* op) {
  dispatch_fold(dtype, reduce, op, [&](auto dtype_tag, auto reduce_tag) {
    using T = CppType<decltype(dtype_tag)::value>;
    combine_typed<decltype(reduce_tag)::value, T>(static_cast<T*>(out), static_cast<const T*>(a),
                                                  static_cast<const T*>(b), n, count);
  });
}

void finalize_mean_cpu(void* out, int64_t n, DType dtype, int64_t count, const char* op) {
  SCATTERX_CHECK(reduce_supported(Reduce::Mean, dtype), DTypeError, op, "avg is not supported for dtype ",
                 dtype_name(dtype));
  dispatch_dtype(dtype, op, [&](auto dtype_tag) {
    using T = CppType<decltype(dtype_tag)::value>;
    if constexpr (reduce_supported(Reduce::Mean, decltype(dtype_tag)::value)) {
      using A = acc_t<T>;
      T* p = static_cast<T*>(out);
      parallel_for(n, kCombineGrain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          p[i] = static_cast<T>(ReduceOp<Reduce::Mean, A>::finalize(static_cast<A>(p[i]), count));
        }
      });
    }
  });
}

}  // namespace scatterx::detail
