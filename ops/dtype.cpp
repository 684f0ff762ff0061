#include "ops/dtype.h"

#include <string>

#include "ops/error.h"
#include "ops/reduce.h"
#include "ops/scalar.h"

namespace scatterx {

DType dtype_from_name(const std::string& name, const char* op) {
#define SCATTERX_DTYPE_PARSE(enum_name, type, str) \
  if (name == (str)) return DType::enum_name;
  SCATTERX_FORALL_DTYPES(SCATTERX_DTYPE_PARSE)
#undef SCATTERX_DTYPE_PARSE
  detail::raise<DTypeError>(op, "expected a dtype name such as float32 or int64, got '", name, "'");
}

Reduce reduce_from_name(const std::string& name, const char* op) {
  if (name == "add") return Reduce::Sum;
  if (name == "multiply") return Reduce::Prod;
#define SCATTERX_REDUCE_PARSE(enum_name, str) \
  if (name == (str)) return Reduce::enum_name;
  SCATTERX_FORALL_REDUCES(SCATTERX_REDUCE_PARSE)
#undef SCATTERX_REDUCE_PARSE
  detail::raise<ArgumentError>(
      op, "expected reduce to be one of sum, prod, mean, amax, amin, add, multiply, none, got '", name, "'");
}

std::string Scalar::str() const {
  switch (kind_) {
    case Kind::Bool:
      return int_ != 0 ? "true" : "false";
    case Kind::Int:
      return std::to_string(int_);
    case Kind::Float:
      return detail::concat(real_);
    case Kind::Complex:
      return detail::concat("(", real_, imag_ < 0 ? "" : "+", imag_, "j)");
  }
  return "?";
}

}  // namespace scatterx
