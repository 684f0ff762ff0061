// Reduce modes and the dtypes each supports. The functors that implement
// them live in reduce_ops.h.
#pragma once

#include <cstdint>
#include <string>

#include "ops/dtype.h"

namespace scatterx {

// _(Name, name as scatter_reduce spells it)
#define SCATTERX_FORALL_REDUCES(_) \
  _(None, "none")                  \
  _(Sum, "sum")                    \
  _(Prod, "prod")                  \
  _(Mean, "mean")                  \
  _(Amax, "amax")                  \
  _(Amin, "amin")

// Folds that only the distributed layer's element-wise combines take
// (torch.distributed's BAND, BOR, BXOR), for integers and bool. They are not
// scatter reduces: torch's scatter_reduce has none, so the scatter ops and
// dispatch_reduce never see them.
#define SCATTERX_FORALL_BITWISE_FOLDS(_) \
  _(BitAnd, "band")                      \
  _(BitOr, "bor")                        \
  _(BitXor, "bxor")

enum class Reduce : uint8_t {
#define SCATTERX_REDUCE_ENUM(name, str) name,
  SCATTERX_FORALL_REDUCES(SCATTERX_REDUCE_ENUM) SCATTERX_FORALL_BITWISE_FOLDS(SCATTERX_REDUCE_ENUM)
#undef SCATTERX_REDUCE_ENUM
};

constexpr bool is_bitwise_fold(Reduce r) { return r == Reduce::BitAnd || r == Reduce::BitOr || r == Reduce::BitXor; }

constexpr const char* reduce_name(Reduce r) {
  switch (r) {
#define SCATTERX_REDUCE_NAME(name, str) \
  case Reduce::name:                    \
    return str;
    SCATTERX_FORALL_REDUCES(SCATTERX_REDUCE_NAME)
    SCATTERX_FORALL_BITWISE_FOLDS(SCATTERX_REDUCE_NAME)
#undef SCATTERX_REDUCE_NAME
  }
  return "unknown";
}

// Whether a dtype supports a reduce: complex numbers have no order (no
// amax/amin), a mean of booleans is undefined, and bitwise folds need
// integers or bool.
constexpr bool reduce_supported(Reduce r, DType d) {
  if (is_bitwise_fold(r)) return is_integral(d, true);
  if (is_complex(d)) return r != Reduce::Amax && r != Reduce::Amin;
  if (d == DType::Bool) return r != Reduce::Mean;
  return true;
}

// Parses a reduce name: scatter_reduce's spellings ("sum", "prod", "mean",
// "amax", "amin"), scatter_'s ("add", "multiply") and "none" (a plain
// write); throws ArgumentError naming `op` for anything else.
Reduce reduce_from_name(const std::string& name, const char* op);

}  // namespace scatterx
