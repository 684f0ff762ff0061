// Runtime-to-compile-time dispatch, written once for every op and backend.
//
//   dispatch_dtype(dtype, op, [&](auto tag) { using T = typename decltype(tag)::type; ... });
//   dispatch_index_dtype(index_dtype, op, [&](auto tag) { using I = ...; });
//   dispatch_reduce(reduce, [&](auto r) { constexpr Reduce R = decltype(r)::value; });
#pragma once

#include <type_traits>

#include "ops/dtype.h"
#include "ops/error.h"
#include "ops/reduce.h"

namespace scatterx {

template <typename T>
struct TypeTag {
  using type = T;
};

template <DType D>
using DTypeTag = std::integral_constant<DType, D>;

template <Reduce R>
using ReduceTag = std::integral_constant<Reduce, R>;

// Calls f(DTypeTag<D>{}) for the runtime dtype; f can name the storage type
// as CppType<decltype(tag)::value>.
template <typename F>
decltype(auto) dispatch_dtype(DType dtype, const char* op, F&& f) {
  switch (dtype) {
#define SCATTERX_DISPATCH_CASE(name, type, str) \
  case DType::name:                             \
    return f(DTypeTag<DType::name>{});
    SCATTERX_FORALL_DTYPES(SCATTERX_DISPATCH_CASE)
#undef SCATTERX_DISPATCH_CASE
  }
  detail::raise<DTypeError>(op, "unknown dtype code ", static_cast<int>(dtype));
}

// Calls f(TypeTag<int32_t>{}) or f(TypeTag<int64_t>{}).
template <typename F>
decltype(auto) dispatch_index_dtype(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::Int32:
      return f(TypeTag<int32_t>{});
    case DType::Int64:
      return f(TypeTag<int64_t>{});
    default:
      break;
  }
  detail::raise<DTypeError>(op, "expected index of dtype int32 or int64, got ", dtype_name(dtype));
}

// Calls f(ReduceTag<R>{}) for the scatter reduces (not the bitwise folds).
template <typename F>
decltype(auto) dispatch_reduce(Reduce reduce, F&& f) {
  switch (reduce) {
#define SCATTERX_DISPATCH_REDUCE(name, str) \
  case Reduce::name:                        \
    return f(ReduceTag<Reduce::name>{});
    SCATTERX_FORALL_REDUCES(SCATTERX_DISPATCH_REDUCE)
#undef SCATTERX_DISPATCH_REDUCE
#define SCATTERX_NOT_A_SCATTER_REDUCE(name, str) case Reduce::name:
    SCATTERX_FORALL_BITWISE_FOLDS(SCATTERX_NOT_A_SCATTER_REDUCE)
#undef SCATTERX_NOT_A_SCATTER_REDUCE
    break;
  }
  detail::raise<ArgumentError>("dispatch_reduce", "unknown reduce code ", static_cast<int>(reduce));
}

// As dispatch_reduce, also over the bitwise folds.
template <typename F>
decltype(auto) dispatch_fold_reduce(Reduce reduce, F&& f) {
  switch (reduce) {
#define SCATTERX_DISPATCH_FOLD(name, str) \
  case Reduce::name:                      \
    return f(ReduceTag<Reduce::name>{});
    SCATTERX_FORALL_REDUCES(SCATTERX_DISPATCH_FOLD)
    SCATTERX_FORALL_BITWISE_FOLDS(SCATTERX_DISPATCH_FOLD)
#undef SCATTERX_DISPATCH_FOLD
  }
  detail::raise<ArgumentError>("dispatch_fold", "unknown reduce code ", static_cast<int>(reduce));
}

// Calls f(DTypeTag<D>{}, ReduceTag<R>{}) when R can fold values of D (the
// element-wise folds of ops/runtime/combine.h, bitwise ones included);
// raises the op's error otherwise, so no unsupported pair is ever
// instantiated.
template <typename F>
void dispatch_fold(DType dtype, Reduce reduce, const char* op, F&& f) {
  SCATTERX_CHECK(reduce_supported(reduce, dtype), DTypeError, op, "reduce ", reduce_name(reduce),
                 " is not supported for dtype ", dtype_name(dtype));
  dispatch_dtype(dtype, op, [&](auto dtype_tag) {
    constexpr DType D = decltype(dtype_tag)::value;
    dispatch_fold_reduce(reduce, [&](auto reduce_tag) {
      constexpr Reduce R = decltype(reduce_tag)::value;
      if constexpr (R == Reduce::None || !reduce_supported(R, D)) {
        detail::raise<ArgumentError>(op, "reduce ", reduce_name(R), " cannot combine values");
      } else {
        f(dtype_tag, reduce_tag);
      }
    });
  });
}

}  // namespace scatterx
