// Internal: the instantiations the gather_scatter family's kernels take,
// listed once for both backends (gather_scatter_cpu_impl.h, gather_dot.cpp and
// their CUDA twins in cuda/): plain C++ templates, so nvcc and the host
// compiler expand the same lists.
#pragma once

#include <type_traits>

#include "ops/dispatch.h"
#include "ops/gather_scatter/gather_scatter_args.h"

namespace scatterx::detail {

// f(dtype_tag, reduce_tag, index_tag, weighted) for gather_scatter's
// arguments: a floating x (CppType<tag::value> the element type), reduce Sum, Mean,
// Amax or Amin (tag::value), the src_index dtype (tag::type; Int64 for the
// identity source, which reads no index) and whether edges are weighted (a
// std::bool_constant). The front end has refused every other combination.
// dispatch_gather_scatter_for<D> is the same with x's dtype known to be D:
// the CPU kernel dispatches the dtype once and compiles each dtype's
// kernels in a file of its own.
template <DType D, typename F>
void dispatch_gather_scatter_for(const GatherScatterArgs& a, const F& f) {
  static_assert(is_floating_point(D), "gather_scatter takes floating dtypes only");
  const bool weighted = a.weight.data() != nullptr;
  const DType src_dtype = a.src_index.data() != nullptr ? a.src_index.dtype() : DType::Int64;
  dispatch_reduce(a.reduce, [&](auto reduce_tag) {
    constexpr Reduce R = decltype(reduce_tag)::value;
    if constexpr (R == Reduce::Sum || R == Reduce::Mean || R == Reduce::Amax || R == Reduce::Amin) {
      dispatch_index_dtype(src_dtype, a.op, [&](auto index_tag) {
        if (weighted)
          f(DTypeTag<D>{}, reduce_tag, index_tag, std::true_type{});
        else
          f(DTypeTag<D>{}, reduce_tag, index_tag, std::false_type{});
      });
    }
  });
}

template <typename F>
void dispatch_gather_scatter(const GatherScatterArgs& a, const F& f) {
  dispatch_dtype(a.x.dtype(), a.op, [&](auto dtype_tag) {
    constexpr DType D = decltype(dtype_tag)::value;
    if constexpr (is_floating_point(D)) dispatch_gather_scatter_for<D>(a, f);
  });
}

// f(dtype_tag, a_index_tag, b_index_tag) for gather_dot's arguments: a
// floating dtype (CppType<tag::value>) and the two index dtypes (tag::type).
template <typename F>
void dispatch_gather_dot(DType dtype, DType a_index, DType b_index, const char* op, const F& f) {
  dispatch_dtype(dtype, op, [&](auto dtype_tag) {
    if constexpr (is_floating_point(decltype(dtype_tag)::value)) {
      dispatch_index_dtype(a_index, op, [&](auto ia_tag) {
        dispatch_index_dtype(b_index, op, [&](auto ib_tag) { f(dtype_tag, ia_tag, ib_tag); });
      });
    }
  });
}

}  // namespace scatterx::detail
