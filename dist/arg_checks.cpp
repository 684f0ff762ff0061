// The collectives' local argument checks (arg_checks.h).
#include "dist/arg_checks.h"

#include <string>

#include "ops/cuda.h"
#include "ops/detail/checks.h"

namespace scatterx::dist {

namespace {

using detail::concat;

// The shape of ws blocks of `block` stacked or concatenated.
bool is_ws_blocks_of(const TensorView& big, const TensorView& block, int ws) {
  if (big.numel() != block.numel() * ws) return false;
  if (block.dim() == 0) return big.dim() == 1 && big.size(0) == ws;
  if (big.dim() == block.dim()) {  // concatenated along dim 0
    if (big.size(0) != block.size(0) * ws) return false;
    for (int64_t d = 1; d < big.dim(); ++d)
      if (big.size(d) != block.size(d)) return false;
    return true;
  }
  if (big.dim() == block.dim() + 1) {  // stacked
    if (big.size(0) != ws) return false;
    for (int64_t d = 0; d < block.dim(); ++d)
      if (big.size(d + 1) != block.size(d)) return false;
    return true;
  }
  return false;
}

std::string blocks_expectation(const TensorView& block, int ws) {
  if (block.dim() == 0) return concat("[", ws, "]");
  std::vector<int64_t> cat = block.sizes().vec();
  cat[0] *= ws;
  std::vector<int64_t> stack = block.sizes().vec();
  stack.insert(stack.begin(), ws);
  return concat(Shape(cat).str(), " (concatenated) or ", Shape(stack).str(), " (stacked)");
}

}  // namespace

void check_cpu(const char* op, const char* name, const TensorView& t) {
  if (t.device().is_cpu()) return;
  detail::check_backend(op, name, t.device());
  SCATTERX_CHECK(t.device().index < scatterx::cuda::device_count(), ArgumentError, op, name,
                 " expected a tensor on a visible device, got a tensor on ", t.device().str(), " with ",
                 scatterx::cuda::device_count(), " CUDA device(s) visible");
}

void check_dtype_match(const char* op, const char* name, const TensorView& t, const char* ref_name,
                       const TensorView& ref) {
  SCATTERX_CHECK(t.dtype() == ref.dtype(), DTypeError, op, name, " expected dtype ", dtype_name(ref.dtype()), " (as ",
                 ref_name, "), got ", dtype_name(t.dtype()));
  SCATTERX_CHECK(t.device() == ref.device(), ArgumentError, op, name, " expected ", ref_name, "'s device ",
                 ref.device().str(), ", got ", t.device().str());
}

void check_output(const char* op, const char* name, const TensorView& t) {
  check_cpu(op, name, t);
  detail::check_no_internal_overlap(op, name, t);
}

void check_list_size(const char* op, const char* name, size_t n, int ws) {
  SCATTERX_CHECK(static_cast<int64_t>(n) == ws, ArgumentError, op, name, " expected one tensor per rank (", ws,
                 " tensors), got ", n);
}

Reduce local_reduce(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return Reduce::Sum;
    case ReduceOp::Prod:
      return Reduce::Prod;
    case ReduceOp::Min:
      return Reduce::Amin;
    case ReduceOp::Max:
      return Reduce::Amax;
    case ReduceOp::Avg:
      return Reduce::Mean;
    case ReduceOp::BAnd:
      return Reduce::BitAnd;
    case ReduceOp::BOr:
      return Reduce::BitOr;
    case ReduceOp::BXor:
      return Reduce::BitXor;
  }
  return Reduce::Sum;
}

void check_reduce_op(const char* op, ReduceOp r, DType dtype) {
  const bool valid = static_cast<int>(r) <= static_cast<int>(ReduceOp::BXor);
  SCATTERX_CHECK(valid, ArgumentError, op, "op expected one of sum, product, min, max, avg, band, bor, bxor, got code ",
                 static_cast<int>(r));
  const bool bitwise = is_bitwise_fold(local_reduce(r));
  SCATTERX_CHECK(reduce_supported(local_reduce(r), dtype), DTypeError, op, "op ", reduce_op_name(r),
                 " is not supported for dtype ", dtype_name(dtype),
                 bitwise             ? " (bitwise reductions take integers and bool)"
                 : is_complex(dtype) ? " (complex numbers have no order: use sum, product or avg)"
                                     : "");
}

void check_ws_blocks(const char* op, const char* big_name, const TensorView& big, const char* block_name,
                     const TensorView& block, int ws) {
  SCATTERX_CHECK(is_ws_blocks_of(big, block, ws), ArgumentError, op, big_name, " expected shape ",
                 blocks_expectation(block, ws), " for ", block_name, " ", block.sizes().str(), " and ", ws,
                 " ranks, got ", big.sizes().str());
}

std::vector<int64_t> resolve_splits(const char* op, const char* name, const std::vector<int64_t>& splits,
                                    const TensorView& t, const char* tensor_name, int ws) {
  SCATTERX_CHECK(t.dim() >= 1, ArgumentError, op, tensor_name, " expected at least 1 dimension, got a 0-d tensor");
  const int64_t rows = t.size(0);
  if (splits.empty()) {
    SCATTERX_CHECK(rows % ws == 0, ArgumentError, op, tensor_name, ".size(0) expected a multiple of the world size ",
                   ws, " (no ", name, " given), got ", rows);
    return std::vector<int64_t>(static_cast<size_t>(ws), rows / ws);
  }
  check_list_size(op, name, splits.size(), ws);
  int64_t sum = 0;
  for (size_t i = 0; i < splits.size(); ++i) {
    SCATTERX_CHECK(splits[i] >= 0, ArgumentError, op, name, "[", i, "] expected >= 0, got ", splits[i]);
    sum += splits[i];
  }
  SCATTERX_CHECK(sum == rows, ArgumentError, op, name, " expected to sum to ", tensor_name, ".size(0) = ", rows,
                 ", got a sum of ", sum);
  return splits;
}

void check_same_rows(const char* op, const TensorView& output, const TensorView& input) {
  bool same = output.dim() == input.dim();
  for (int64_t d = 1; same && d < output.dim(); ++d) same = output.size(d) == input.size(d);
  SCATTERX_CHECK(same, ArgumentError, op, "output expected the shape of input beyond dim 0 (input is ",
                 input.sizes().str(), "), got ", output.sizes().str());
}

}  // namespace scatterx::dist
