// Tensors of more than 2^31 elements (int8 / bool, about 2 GiB each): gather
// from and scatter into positions beyond 2^31, with int64 indices along a
// long dim and int32 indices whose rows start beyond 2^31 (the element
// offsets must be computed in 64 bits). Expected values are read straight
// from memory; the index stays small so each test takes seconds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/test_util.h"

namespace sxt {
namespace {

constexpr int64_t k2g = int64_t{1} << 31;

TEST(LargeTest, OneDimInt8BeyondTwoToThe31) {
  const int64_t n = k2g + 64;
  Tensor big = Tensor::zeros({n}, DType::Int8);
  int8_t* p = static_cast<int8_t*>(big.data());
  const std::vector<int64_t> where = {k2g + 5, 3, n - 1, k2g - 1, k2g};
  for (size_t i = 0; i < where.size(); ++i) p[where[i]] = static_cast<int8_t>(11 * (i + 1));
  Tensor index = make_tensor<int64_t>({5}, where);

  // gather / index_select read beyond 2^31
  const Tensor g = scatterx::gather(big, 0, index);
  const Tensor s = scatterx::index_select(big, 0, index);
  for (size_t i = 0; i < where.size(); ++i) {
    EXPECT_EQ(static_cast<const int8_t*>(g.data())[i], 11 * static_cast<int>(i + 1)) << i;
    EXPECT_EQ(static_cast<const int8_t*>(s.data())[i], 11 * static_cast<int>(i + 1)) << i;
  }
  // through a reversed view: element i of the flip is p[n - 1 - i]
  const Tensor from_end = scatterx::gather(big.flip(0), 0, make_tensor<int64_t>({3}, {0, n - 1 - (k2g + 5), n - 1}));
  EXPECT_EQ(static_cast<const int8_t*>(from_end.data())[0], p[n - 1]);
  EXPECT_EQ(static_cast<const int8_t*>(from_end.data())[1], p[k2g + 5]);
  EXPECT_EQ(static_cast<const int8_t*>(from_end.data())[2], p[0]);

  // scatter_ writes beyond 2^31 and nowhere else nearby
  Tensor src = make_tensor<int8_t>({3}, {-7, 8, -9});
  Tensor at = make_tensor<int64_t>({3}, {k2g + 40, k2g + 42, k2g + 40});
  scatterx::scatter_(big, 0, at, src);
  EXPECT_EQ(p[k2g + 40], -9);  // last write wins
  EXPECT_EQ(p[k2g + 42], 8);
  EXPECT_EQ(p[k2g + 41], 0);
  EXPECT_EQ(p[k2g + 39], 0);
  EXPECT_EQ(p[k2g + 43], 0);

  // scatter_add_ (wraps), scatter_reduce_ amax and index_add_ there too
  Tensor add_src = make_tensor<int8_t>({3}, {100, 100, 1});
  Tensor add_at = make_tensor<int64_t>({3}, {k2g + 50, k2g + 50, k2g + 51});
  scatterx::scatter_add_(big, 0, add_at, add_src);
  EXPECT_EQ(p[k2g + 50], static_cast<int8_t>(200));
  EXPECT_EQ(p[k2g + 51], 1);
  scatterx::scatter_reduce_(big, 0, add_at, make_tensor<int8_t>({3}, {-3, 5, -4}), Reduce::Amax, false);
  EXPECT_EQ(p[k2g + 50], 5);
  EXPECT_EQ(p[k2g + 51], -4);
  scatterx::index_add_(big, 0, make_tensor<int64_t>({2}, {n - 1, n - 2}), make_tensor<int8_t>({2}, {2, 3}),
                       Scalar(int64_t{-2}));
  EXPECT_EQ(p[n - 1], static_cast<int8_t>(33 - 4));
  EXPECT_EQ(p[n - 2], -6);
  EXPECT_EQ(p[n - 3], 0);
}

TEST(LargeTest, OneDimBoolBeyondTwoToThe31) {
  const int64_t n = k2g + 64;
  Tensor big = Tensor::zeros({n}, DType::Bool);
  bool* p = static_cast<bool*>(big.data());
  Tensor index = make_tensor<int64_t>({2}, {k2g + 1, n - 1});
  scatterx::scatter_(big, 0, index, Scalar(true));
  EXPECT_TRUE(p[k2g + 1]);
  EXPECT_TRUE(p[n - 1]);
  EXPECT_FALSE(p[k2g]);
  EXPECT_FALSE(p[k2g + 2]);
  const Tensor g = scatterx::gather(big, 0, make_tensor<int64_t>({3}, {k2g + 1, k2g + 2, n - 1}));
  EXPECT_TRUE(same_values(g, make_tensor<bool>({3}, {true, false, true})));
  scatterx::scatter_reduce_(big, 0, make_tensor<int64_t>({2}, {k2g + 1, k2g + 1}),
                            make_tensor<bool>({2}, {true, false}), Reduce::Prod);
  EXPECT_FALSE(p[k2g + 1]);
}

// [65537, 32768] int8: 2^31 + 2^15 elements; row 65536 starts at 2^31.
TEST(LargeTest, TwoDimInt8WithInt32Index) {
  const int64_t rows = 65537;
  const int64_t cols = 32768;
  Tensor big = Tensor::zeros({rows, cols}, DType::Int8);
  ASSERT_GT(big.numel(), k2g);
  int8_t* p = static_cast<int8_t*>(big.data());
  auto row_value = [](int64_t r, int64_t c) { return static_cast<int8_t>((r * 31 + c * 7) % 251 - 125); };
  for (int64_t r : {int64_t{0}, int64_t{3}, rows - 2, rows - 1}) {
    for (int64_t c = 0; c < cols; ++c) p[r * cols + c] = row_value(r, c);
  }

  // index_select of whole rows, one of them beyond 2^31
  const Tensor sel = scatterx::index_select(big, 0, make_tensor<int32_t>({3}, {65536, 0, 65535}));
  ASSERT_EQ(sel.sizes(), Shape({3, cols}));
  const int8_t* q = static_cast<const int8_t*>(sel.data());
  EXPECT_EQ(std::memcmp(q, p + (rows - 1) * cols, cols), 0);
  EXPECT_EQ(std::memcmp(q + cols, p, cols), 0);
  EXPECT_EQ(std::memcmp(q + 2 * cols, p + (rows - 2) * cols, cols), 0);

  // gather along dim 1 with an int32 index of shape [rows, 1]: row i reads
  // column c_i of row i, the last one beyond 2^31
  Tensor index = Tensor::empty({rows, 1}, DType::Int32);
  int32_t* ix = static_cast<int32_t*>(index.data());
  for (int64_t r = 0; r < rows; ++r) {
    ix[r] = static_cast<int32_t>((r * 7919) % cols);
    p[r * cols + ix[r]] = static_cast<int8_t>(r % 251 - 125);
  }
  const Tensor g = scatterx::gather(big, 1, index);
  ASSERT_EQ(g.sizes(), Shape({rows, 1}));
  const int8_t* gv = static_cast<const int8_t*>(g.data());
  int64_t wrong = 0;
  for (int64_t r = 0; r < rows; ++r) wrong += gv[r] != static_cast<int8_t>(r % 251 - 125);
  EXPECT_EQ(wrong, 0);

  // scatter_ the negated values back along dim 1
  Tensor src = Tensor::empty({rows, 1}, DType::Int8);
  int8_t* sv = static_cast<int8_t*>(src.data());
  for (int64_t r = 0; r < rows; ++r) sv[r] = static_cast<int8_t>(-gv[r]);
  scatterx::scatter_(big, 1, index, src);
  wrong = 0;
  for (int64_t r = 0; r < rows; ++r) wrong += p[r * cols + ix[r]] != sv[r];
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(p[(rows - 1) * cols + (ix[rows - 1] + 1) % cols], row_value(rows - 1, (ix[rows - 1] + 1) % cols));

  // index_add_ of rows onto row 65536 (twice) and row 3
  std::vector<int8_t> last(p + (rows - 1) * cols, p + rows * cols);
  std::vector<int8_t> third(p + 3 * cols, p + 4 * cols);
  Tensor source = Tensor::empty({3, cols}, DType::Int8);
  int8_t* so = static_cast<int8_t*>(source.data());
  for (int64_t i = 0; i < 3 * cols; ++i) so[i] = static_cast<int8_t>(i % 13 - 6);
  scatterx::index_add_(big, 0, make_tensor<int32_t>({3}, {65536, 3, 65536}), source);
  int64_t bad_rows = 0;
  for (int64_t c = 0; c < cols; ++c) {
    bad_rows += p[(rows - 1) * cols + c] != static_cast<int8_t>(last[c] + so[c] + so[2 * cols + c]);
    bad_rows += p[3 * cols + c] != static_cast<int8_t>(third[c] + so[cols + c]);
  }
  EXPECT_EQ(bad_rows, 0);

  // a broadcast index (the grouped path) onto rows beyond 2^31: amin of two rows
  Tensor narrow = make_tensor<int64_t>({2, 1}, {65536, 65536});
  Tensor two = Tensor::empty({2, cols}, DType::Int8);
  int8_t* tw = static_cast<int8_t*>(two.data());
  for (int64_t i = 0; i < 2 * cols; ++i) tw[i] = static_cast<int8_t>((i * 5) % 255 - 127);
  scatterx::scatter_reduce_(big, 0, narrow.expand({2, cols}), two, Reduce::Amin, false);
  bad_rows = 0;
  for (int64_t c = 0; c < cols; ++c) bad_rows += p[(rows - 1) * cols + c] != std::min(tw[c], tw[cols + c]);
  EXPECT_EQ(bad_rows, 0);
}

}  // namespace
}  // namespace sxt
