// all_to_all (lists of tensors of different shapes per peer),
// all_to_all_single (equal, uneven and zero-size splits; non-contiguous
// views) and all_to_all_v (receive splits worked out), every dtype.
#include <gtest/gtest.h>

#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "tests/dist/dist_test_util.h"

namespace sxd {
namespace {

namespace dist = scatterx::dist;

// Rows rank r sends to rank p.
using SplitFn = std::function<int64_t(int r, int p)>;

struct SplitPattern {
  std::string name;
  SplitFn rows;
};

std::vector<SplitPattern> split_patterns() {
  return {
      {"Equal", [](int, int) { return int64_t{2}; }},
      {"Uneven", [](int r, int p) { return int64_t{(r + 2 * p + 1) % 4}; }},
      {"RankZeroSendsNothing", [](int r, int p) { return r == 0 ? int64_t{0} : int64_t{1 + (r * p) % 3}; }},
      {"NothingToLastRank", [](int r, int p) { return p == world().size() - 1 ? 0 : int64_t{r + p + 1}; }},
      {"AllZero", [](int, int) { return int64_t{0}; }},
      {"OneBigPeer", [](int r, int p) { return (r + p) % 2 == 0 ? int64_t{3000} : int64_t{1}; }},
  };
}

// Rows of input on rank r that precede those for rank p.
int64_t send_offset(const SplitFn& s, int r, int p) {
  int64_t off = 0;
  for (int q = 0; q < p; ++q) off += s(r, q);
  return off;
}

class AllToAllTest : public DistTest, public ::testing::WithParamInterface<DType> {
 protected:
  DType dtype() const { return GetParam(); }
  V value(int r, int64_t i) const { return plain_value(dtype(), r, i); }

  std::vector<int64_t> send_splits(const SplitFn& s) const {
    std::vector<int64_t> v;
    for (int p = 0; p < ws(); ++p) v.push_back(s(rank(), p));
    return v;
  }
  std::vector<int64_t> recv_splits(const SplitFn& s) const {
    std::vector<int64_t> v;
    for (int q = 0; q < ws(); ++q) v.push_back(s(q, rank()));
    return v;
  }
  static int64_t total(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

  // Expected element `i` of the output of rank me, whose rows come from the
  // ranks in order (recv splits s(q, me)), each row of `row_len` elements.
  V expected_output(const SplitFn& s, int64_t row_len, int64_t i) const {
    int64_t row = i / row_len;
    const int64_t col = i % row_len;
    for (int q = 0; q < ws(); ++q) {
      const int64_t n = s(q, rank());
      if (row < n) return value(q, (send_offset(s, q, rank()) + row) * row_len + col);
      row -= n;
    }
    ADD_FAILURE() << "element " << i << " beyond the expected rows";
    return {};
  }

  // all_to_all_single with the pattern; trailing = the shape after dim 0.
  void check_single(const SplitPattern& pattern, const Shape& trailing, Layout in_layout, Layout out_layout,
                    bool explicit_splits) {
    const SplitFn& s = pattern.rows;
    const int64_t row_len = shape_numel(trailing);
    const std::vector<int64_t> in_splits = send_splits(s);
    const std::vector<int64_t> out_splits = recv_splits(s);
    Shape in_shape = trailing, out_shape = trailing;
    in_shape.insert(0, total(in_splits));
    out_shape.insert(0, total(out_splits));
    Buf in = make_buf(in_shape, dtype(), in_layout);
    fill(in.view, [&](int64_t i) { return value(rank(), i); });
    Buf out = make_buf(out_shape, dtype(), out_layout);
    const std::vector<int64_t> none;
    dist::all_to_all_single(out.view, in.view, explicit_splits ? out_splits : none, explicit_splits ? in_splits : none,
                            comm());
    const std::string what = pattern.name + ", trailing " + trailing.str() + ", input " + layout_label(in_layout) +
                             ", output " + layout_label(out_layout);
    EXPECT_TRUE(holds(out.view, [&](int64_t i) { return expected_output(s, row_len, i); })) << what;
    EXPECT_TRUE(out.unchanged_outside_view()) << what;
    EXPECT_TRUE(holds(in.view, [&](int64_t i) { return value(rank(), i); })) << "input modified: " << what;
  }
};

std::string dtype_name_of(const ::testing::TestParamInfo<DType>& info) { return sxt::dtype_label(info.param); }

// ---------------------------------------------------------------- all_to_all (lists)

TEST_P(AllToAllTest, ListsOfDifferentShapes) {
  // rank r sends to p a tensor of shape [(r + 2p) % 3, 1 + (r * p) % 3]
  // (zero rows included)
  auto shape_of = [&](int r, int p) { return Shape{(r + 2 * p) % 3, 1 + (r * p) % 3}; };
  std::vector<Tensor> ins, outs;
  std::vector<TensorView> inputs, outputs;
  for (int p = 0; p < ws(); ++p) {
    ins.push_back(make(shape_of(rank(), p), dtype(), [&](int64_t i) { return value(rank(), p * 1000 + i); }));
    outs.push_back(Tensor::zeros(shape_of(p, rank()), dtype()));
  }
  for (int p = 0; p < ws(); ++p) {
    inputs.push_back(ins[p]);
    outputs.push_back(outs[p]);
  }
  dist::all_to_all(outputs, inputs, comm());
  for (int q = 0; q < ws(); ++q) {
    EXPECT_TRUE(holds(outputs[q], [&](int64_t i) { return value(q, rank() * 1000 + i); })) << "from rank " << q;
  }
}

TEST_P(AllToAllTest, ListsNonContiguousAnd0d) {
  std::vector<Buf> ins, outs;
  std::vector<TensorView> inputs, outputs;
  for (int p = 0; p < ws(); ++p) {
    const Layout layout = p % 2 == 0 ? Layout::Transposed : Layout::Strided;
    ins.push_back(make_buf({3, 4}, dtype(), layout));
    fill(ins.back().view, [&](int64_t i) { return value(rank(), p * 100 + i); });
    outs.push_back(make_buf({3, 4}, dtype(), p % 2 == 0 ? Layout::Flipped : Layout::Transposed));
  }
  for (int p = 0; p < ws(); ++p) {
    inputs.push_back(ins[p].view);
    outputs.push_back(outs[p].view);
  }
  dist::all_to_all(outputs, inputs, comm());
  for (int q = 0; q < ws(); ++q) {
    EXPECT_TRUE(holds(outputs[q], [&](int64_t i) { return value(q, rank() * 100 + i); })) << "from rank " << q;
    EXPECT_TRUE(outs[q].unchanged_outside_view());
  }
  // 0-d tensors
  std::vector<Tensor> ins0, outs0;
  std::vector<TensorView> inputs0, outputs0;
  for (int p = 0; p < ws(); ++p) {
    ins0.push_back(make({}, dtype(), [&](int64_t) { return value(rank(), p); }));
    outs0.push_back(Tensor::zeros({}, dtype()));
  }
  for (int p = 0; p < ws(); ++p) {
    inputs0.push_back(ins0[p]);
    outputs0.push_back(outs0[p]);
  }
  dist::all_to_all(outputs0, inputs0, comm());
  for (int q = 0; q < ws(); ++q) {
    EXPECT_TRUE(holds(outputs0[q], [&](int64_t) { return value(q, rank()); })) << "0-d from rank " << q;
  }
}

// ---------------------------------------------------------------- all_to_all_single

TEST_P(AllToAllTest, SingleEqualSplitsImplicit) {
  check_single(split_patterns()[0], Shape{3}, Layout::Contiguous, Layout::Contiguous, /*explicit_splits=*/false);
  check_single(split_patterns()[0], Shape{}, Layout::Contiguous, Layout::Contiguous, false);
  check_single(split_patterns()[0], Shape{2, 2}, Layout::Contiguous, Layout::Contiguous, false);
}

TEST_P(AllToAllTest, SingleAllPatterns) {
  for (const SplitPattern& pattern : split_patterns()) {
    check_single(pattern, Shape{3}, Layout::Contiguous, Layout::Contiguous, true);
    check_single(pattern, Shape{}, Layout::Contiguous, Layout::Contiguous, true);
  }
}

TEST_P(AllToAllTest, SingleNonContiguous) {
  const std::vector<SplitPattern> patterns = split_patterns();
  for (const SplitPattern& pattern : {patterns[0], patterns[1], patterns[2]}) {
    for (Layout in_layout : {Layout::Transposed, Layout::Strided, Layout::Flipped}) {
      for (Layout out_layout : {Layout::Contiguous, Layout::Transposed, Layout::Strided, Layout::Flipped}) {
        check_single(pattern, Shape{5}, in_layout, out_layout, true);
      }
    }
  }
  check_single(patterns[0], Shape{4}, Layout::Transposed, Layout::Strided, false);
}

// ---------------------------------------------------------------- all_to_all_v

TEST_P(AllToAllTest, VariableWorksOutReceiveSplits) {
  for (const SplitPattern& pattern : split_patterns()) {
    for (const Shape& trailing : {Shape{3}, Shape{}, Shape{2, 3}}) {
      const SplitFn& s = pattern.rows;
      const std::vector<int64_t> sends = send_splits(s);
      Shape in_shape = trailing;
      in_shape.insert(0, total(sends));
      Tensor input = make(in_shape, dtype(), [&](int64_t i) { return value(rank(), i); });
      const dist::AllToAllVResult result = dist::all_to_all_v(input, sends, comm());
      const std::string what = pattern.name + ", trailing " + trailing.str();
      EXPECT_EQ(result.recv_splits, recv_splits(s)) << what;
      Shape out_shape = trailing;
      out_shape.insert(0, total(recv_splits(s)));
      ASSERT_EQ(result.output.sizes(), out_shape) << what;
      EXPECT_EQ(result.output.dtype(), dtype()) << what;
      EXPECT_TRUE(result.output.is_contiguous()) << what;
      EXPECT_TRUE(holds(result.output, [&](int64_t i) { return expected_output(s, shape_numel(trailing), i); }))
          << what;
    }
  }
}

TEST_P(AllToAllTest, VariableNonContiguousInput) {
  const SplitFn s = split_patterns()[1].rows;
  const std::vector<int64_t> sends = send_splits(s);
  Buf in = make_buf({total(sends), 4}, dtype(), Layout::Transposed);
  fill(in.view, [&](int64_t i) { return value(rank(), i); });
  const dist::AllToAllVResult result = dist::all_to_all_v(in.view, sends, comm());
  EXPECT_EQ(result.recv_splits, recv_splits(s));
  EXPECT_TRUE(holds(result.output, [&](int64_t i) { return expected_output(s, 4, i); }));
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, AllToAllTest, ::testing::ValuesIn(test_dtypes()), dtype_name_of);

// ---------------------------------------------------------------- sizes

class AllToAllLargeTest : public DistTest {};

// A few MiB per peer, uneven.
TEST_F(AllToAllLargeTest, SingleUnevenMiB) {
  const int64_t row = 256;  // float32 elements per row: 1 KiB
  auto s = [](int r, int p) { return int64_t{1024 + 517 * ((r + 3 * p) % 5)}; };
  std::vector<int64_t> sends, recvs;
  for (int p = 0; p < ws(); ++p) sends.push_back(s(rank(), p));
  for (int q = 0; q < ws(); ++q) recvs.push_back(s(q, rank()));
  const int64_t in_rows = std::accumulate(sends.begin(), sends.end(), int64_t{0});
  const int64_t out_rows = std::accumulate(recvs.begin(), recvs.end(), int64_t{0});
  Tensor in = make({in_rows, row}, DType::Float32, [&](int64_t i) { return plain_value(DType::Float32, rank(), i); });
  Tensor out = Tensor::empty({out_rows, row}, DType::Float32);
  dist::all_to_all_single(out, in, recvs, sends, comm());
  int64_t offset = 0;
  for (int q = 0; q < ws(); ++q) {
    const int64_t src_row0 = send_offset(s, q, rank());
    TensorView block = out.slice(0, offset, offset + recvs[q]);
    EXPECT_TRUE(holds(block, [&](int64_t i) { return plain_value(DType::Float32, q, src_row0 * row + i); }))
        << "from rank " << q;
    offset += recvs[q];
  }
}

}  // namespace
}  // namespace sxd
