#include "dist/embedding_routing.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <sstream>
#include <string>

#include "dist/agreement.h"
#include "ops/error.h"
#include "ops/gather_scatter/gather_scatter.h"

namespace scatterx::dist::embedding_detail {
namespace {

bool is_index(DType d) { return d == DType::Int32 || d == DType::Int64; }

void check_sharding(const TensorView& shard, const std::vector<int64_t>& starts, int world, int rank) {
  SCATTERX_CHECK(static_cast<int64_t>(starts.size()) == world + 1 && starts[0] == 0, ArgumentError, kOp,
                 "expected row_starts of group size + 1 (", world + 1, ") entries starting at 0, got ", starts.size(),
                 " entries");
  for (int r = 0; r < world; ++r)
    SCATTERX_CHECK(starts[r] <= starts[r + 1], ArgumentError, kOp, "expected non-decreasing row_starts, got ",
                   starts[r], " before ", starts[r + 1]);
  SCATTERX_CHECK(shard.dim() == 2, ArgumentError, kOp, "expected weight to be a 2-d shard [rows, dim], got shape ",
                 shard.sizes().str());
  SCATTERX_CHECK(shard.dtype() == DType::Float32 || shard.dtype() == DType::Float64, DTypeError, kOp,
                 "expected weight of dtype float32 or float64, got ", dtype_name(shard.dtype()));
  SCATTERX_CHECK(shard.device().is_cpu(), ArgumentError, kOp, "expected weight on the cpu, got ", shard.device().str());
  SCATTERX_CHECK(shard.size(0) == starts[rank + 1] - starts[rank], ArgumentError, kOp,
                 "expected this rank's shard to have ", starts[rank + 1] - starts[rank], " rows (", starts[rank],
                 " .. ", starts[rank + 1], "), got ", shard.size(0));
  SCATTERX_CHECK(shard.size(1) >= 1, ArgumentError, kOp, "expected embedding_dim >= 1, got ", shard.size(1));
}

void check_offsets(const TensorView& input, const TensorView& offsets) {
  const int64_t n = input.size(0);
  const int64_t bags = offsets.size(0);
  SCATTERX_CHECK(bags > 0 || n == 0, ArgumentError, kOp, "expected offsets with at least one entry for ", n,
                 " input ids, got none");
  if (bags == 0) return;
  SCATTERX_CHECK(index_at(offsets, 0) == 0, ArgumentError, kOp, "expected offsets[0] == 0, got ", index_at(offsets, 0));
  for (int64_t b = 1; b < bags; ++b) {
    const int64_t o = index_at(offsets, b);
    SCATTERX_CHECK(o >= index_at(offsets, b - 1) && o <= n, ArgumentError, kOp,
                   "expected non-decreasing offsets in [0, ", n, "], got offsets[", b, "] = ", o, " after ",
                   index_at(offsets, b - 1));
  }
}

// Whether every id lies in [0, num): one branch-free pass (a min and a max
// that vectorize) over contiguous ids; the position of a bad one is looked
// for only when there is one.
template <typename I>
bool typed_ids_in_range(const I* ids, int64_t n, int64_t num) {
  I lo = 0, hi = 0;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, ids[i]);
    hi = std::max(hi, ids[i]);
  }
  return lo >= 0 && static_cast<int64_t>(hi) < num;
}

bool ids_in_range(const TensorView& input, int64_t num) {
  if (input.size(0) > 1 && input.stride(0) != 1) return false;  // the checking loop handles any stride
  if (input.dtype() == DType::Int32)
    return typed_ids_in_range(static_cast<const int32_t*>(input.data()), input.size(0), num);
  return typed_ids_in_range(static_cast<const int64_t*>(input.data()), input.size(0), num);
}

// This rank's argument errors, in the order the header documents them.
void check_local(const TensorView& shard, const TensorView& input, const TensorView& offsets, const TensorView* psw,
                 const std::vector<int64_t>& starts, BagMode mode, int world, int rank) {
  check_sharding(shard, starts, world, rank);
  SCATTERX_CHECK(input.dim() == 1 && is_index(input.dtype()) && input.device().is_cpu(), ArgumentError, kOp,
                 "expected input to be 1-d int32 or int64 ids on the cpu, got ", input.str());
  SCATTERX_CHECK(offsets.dim() == 1 && is_index(offsets.dtype()) && offsets.device().is_cpu(), ArgumentError, kOp,
                 "expected offsets to be 1-d int32 or int64 on the cpu, got ", offsets.str());
  check_offsets(input, offsets);
  const int64_t num = starts[world];
  if (!ids_in_range(input, num)) {
    for (int64_t i = 0; i < input.size(0); ++i) {
      const int64_t id = index_at(input, i);
      SCATTERX_CHECK(id >= 0 && id < num, IndexError, kOp, "expected input ids in [0, ", num, "), got ", id,
                     " at position ", i);
    }
  }
  if (psw == nullptr) return;
  SCATTERX_CHECK(mode == BagMode::Sum, ArgumentError, kOp,
                 "expected per_sample_weights only with mode 'sum' (as torch), got mode ",
                 mode == BagMode::Mean ? "'mean'" : "'max'");
  SCATTERX_CHECK(psw->dim() == 1 && psw->size(0) == input.size(0), ArgumentError, kOp,
                 "expected per_sample_weights of input's shape [", input.size(0), "], got ", psw->sizes().str());
  SCATTERX_CHECK(psw->dtype() == shard.dtype(), DTypeError, kOp, "expected per_sample_weights of the weight's dtype ",
                 dtype_name(shard.dtype()), ", got ", dtype_name(psw->dtype()));
}

using agreement::gather_records;

// The rank owning an id: a branch-free count of the block starts at or below
// it for small groups (a binary search mispredicts about once per random
// id), a binary search beyond.
class OwnerOf {
 public:
  explicit OwnerOf(const std::vector<int64_t>& starts) : starts_(starts) {}
  int64_t operator()(int64_t id) const {
    const int64_t world = static_cast<int64_t>(starts_.size()) - 1;
    if (world > kLinear)
      return static_cast<int64_t>(std::upper_bound(starts_.begin(), starts_.end(), id) - starts_.begin()) - 1;
    // starts[0] = 0 <= id < starts[world]; an empty block shares its start
    // with the next one, so the count passes it, as upper_bound does.
    int64_t o = 0;
    for (int64_t r = 1; r < world; ++r) o += starts_[r] <= id ? 1 : 0;
    return o;
  }

 private:
  static constexpr int64_t kLinear = 16;
  const std::vector<int64_t>& starts_;
};

// ok, dim, dtype, mode, weighted, then the W + 1 row_starts.
constexpr int64_t kFixed = 5;

}  // namespace

void agree_as_failed(const Communicator& comm) {
  std::vector<int64_t> mine(static_cast<size_t>(kFixed + comm.size() + 1), -1);
  mine[0] = 1;
  gather_records(mine, comm);
}

void check_and_agree(const TensorView& shard, const TensorView& input, const TensorView& offsets, const TensorView* psw,
                     const std::vector<int64_t>& starts, BagMode mode, const Communicator& comm) {
  const int world = comm.size();
  std::exception_ptr problem;
  try {
    check_local(shard, input, offsets, psw, starts, mode, world, comm.rank());
  } catch (const Error&) {
    problem = std::current_exception();
  }
  const bool ok = !problem;
  std::vector<int64_t> mine = {ok ? 0 : 1, ok ? shard.size(1) : -1, ok ? static_cast<int64_t>(shard.dtype()) : -1,
                               static_cast<int64_t>(mode), psw != nullptr ? 1 : 0};
  for (int r = 0; r <= world; ++r) mine.push_back(ok ? starts[r] : -1);
  const std::vector<int64_t> every = gather_records(mine, comm);
  if (problem) std::rethrow_exception(problem);
  const char* names[] = {"embedding_dim", "dtype", "mode", "per_sample_weights presence"};
  agreement::raise_mismatches(
      kOp, every, world, [&](int64_t i) { return std::string(i < kFixed ? names[i - 1] : "sharding (row_starts)"); });
}

Tensor plan_requests(const TensorView& input, const TensorView& offsets, const TensorView* psw,
                     const std::vector<int64_t>& starts, EmbeddingBagHandle& h) {
  const int world = h.comm.size();
  const int64_t n = input.size(0);
  const int64_t bags = offsets.size(0);
  const int64_t cols = h.weighted ? 3 : 2;
  // Owner and bag of each id; ids per owner and bags per owner (a bag counts
  // once per owner it has ids on).
  Tensor owner_bag = Tensor::empty({n, 2}, DType::Int64);  // per id: its owner and its bag
  auto* owner = owner_bag.data_as<int64_t>();
  h.id_send_splits.assign(static_cast<size_t>(world), 0);
  h.part_recv_splits.assign(static_cast<size_t>(world), 0);
  std::vector<int64_t> last_bag(static_cast<size_t>(world), -1);
  const OwnerOf owner_of(starts);
  for (int64_t b = 0, i = 0; b < bags; ++b) {
    const int64_t end = b + 1 < bags ? index_at(offsets, b + 1) : n;
    for (; i < end; ++i) {
      const int64_t o = owner_of(index_at(input, i));
      owner[2 * i] = o;
      owner[2 * i + 1] = b;
      ++h.id_send_splits[o];
      h.part_recv_splits[o] += last_bag[o] != b ? 1 : 0;  // no branch: the owners of random ids alternate
      last_bag[o] = b;
    }
  }
  std::vector<int64_t> next_id(static_cast<size_t>(world), 0), next_part(static_cast<size_t>(world), 0);
  for (int o = 1; o < world; ++o) {
    next_id[o] = next_id[o - 1] + h.id_send_splits[o - 1];
    next_part[o] = next_part[o - 1] + h.part_recv_splits[o - 1];
  }
  const int64_t parts = next_part[world - 1] + h.part_recv_splits[world - 1];
  Tensor meta = Tensor::empty({n, cols}, DType::Int64);
  h.sent_pos = Tensor::empty({n}, DType::Int64);
  h.part_bag = Tensor::empty({parts}, DType::Int64);
  auto* m = meta.data_as<int64_t>();
  auto* pos = h.sent_pos.data_as<int64_t>();
  auto* part_bag = h.part_bag.data_as<int64_t>();
  std::fill(last_bag.begin(), last_bag.end(), -1);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t o = owner[2 * i];
    const int64_t b = owner[2 * i + 1];
    const int64_t s = next_id[o]++;
    pos[s] = i;
    m[s * cols] = index_at(input, i) - starts[o];
    m[s * cols + 1] = b;
    // Branch-free: a new bag takes the next slot; a repeated one rewrites its
    // own (the first id of every owner is new, so the slot is the owner's).
    next_part[o] += last_bag[o] != b ? 1 : 0;
    part_bag[next_part[o] - 1] = b;
    last_bag[o] = b;
  }
  with_float(h.dtype, [&](auto zero) {
    using T = decltype(zero);
    if (h.weighted) {
      for (int64_t s = 0; s < n; ++s) {
        const double w = static_cast<const T*>(psw->data())[pos[s] * psw->stride(0)];
        std::memcpy(m + s * cols + 2, &w, sizeof w);
      }
    }
    if (h.mode != BagMode::Mean) return;
    h.part_scale = Tensor::empty({parts}, h.dtype);
    T* scale = h.part_scale.data_as<T>();
    for (int64_t q = 0; q < parts; ++q) {
      const int64_t b = part_bag[q];
      const int64_t len = (b + 1 < bags ? index_at(offsets, b + 1) : n) - index_at(offsets, b);
      scale[q] = T(1) / static_cast<T>(len);
    }
  });
  return meta;
}

Tensor plan_parts(const TensorView& received, EmbeddingBagHandle& h) {
  const int world = h.comm.size();
  const int64_t n = received.size(0);
  const int64_t cols = received.size(1);
  const auto* m = static_cast<const int64_t*>(received.data());
  h.recv_row = Tensor::empty({n}, DType::Int64);
  h.recv_part = Tensor::empty({n}, DType::Int64);
  auto* row = h.recv_row.data_as<int64_t>();
  auto* part = h.recv_part.data_as<int64_t>();
  h.part_send_splits.assign(static_cast<size_t>(world), 0);
  std::vector<int64_t> indptr = {0};
  int64_t i = 0;
  for (int s = 0; s < world; ++s) {  // a new partial at each source block and at each change of bag
    const int64_t end = i + h.id_recv_splits[s];
    for (int64_t first = i; i < end; ++i) {
      row[i] = m[i * cols];
      if (i > first && m[i * cols + 1] == m[(i - 1) * cols + 1]) {
        part[i] = part[i - 1];
        continue;
      }
      if (i > 0) indptr.push_back(i);
      part[i] = static_cast<int64_t>(indptr.size()) - 1;
      ++h.part_send_splits[s];
    }
  }
  if (n > 0) indptr.push_back(n);
  h.parts = static_cast<int64_t>(indptr.size()) - 1;
  if (h.weighted) {
    h.recv_weight = Tensor::empty({n}, h.dtype);
    with_float(h.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* w = h.recv_weight.data_as<T>();
      for (int64_t r = 0; r < n; ++r) {
        double v;
        std::memcpy(&v, m + r * cols + 2, sizeof v);
        w[r] = static_cast<T>(v);
      }
    });
  }
  Tensor out = Tensor::empty({static_cast<int64_t>(indptr.size())}, DType::Int64);
  std::copy(indptr.begin(), indptr.end(), out.data_as<int64_t>());
  return out;
}

Tensor distinct_rows(const EmbeddingBagHandle& h, Tensor* row_ids) {
  const int64_t n = h.recv_row.numel();
  const auto* row = h.recv_row.data_as<int64_t>();
  std::vector<int64_t> slot(static_cast<size_t>(h.shard_rows), -1);
  for (int64_t r = 0; r < n; ++r) slot[row[r]] = 0;
  int64_t distinct = 0;
  for (int64_t& s : slot)
    if (s == 0) s = distinct++ + 1;  // 1-based while counting
  *row_ids = Tensor::empty({distinct}, DType::Int64);
  auto* ids = row_ids->data_as<int64_t>();
  for (int64_t k = 0; k < h.shard_rows; ++k)
    if (slot[k] > 0) ids[slot[k] - 1] = k;
  Tensor pos = Tensor::empty({n}, DType::Int64);
  auto* p = pos.data_as<int64_t>();
  for (int64_t r = 0; r < n; ++r) p[r] = slot[row[r]] - 1;
  return pos;
}

}  // namespace scatterx::dist::embedding_detail
