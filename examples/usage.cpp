// The README's usage example: scatter_reduce_ with amax, then index_select.
#include <cstdio>

#include "scatterx.h"

int main() {
  using scatterx::DType;
  using scatterx::Tensor;
  using scatterx::TensorView;

  // out[index[i]] = max over i of src[i]; TensorView wraps memory without copying.
  float src_data[] = {1, 5, 2, 7, 3, -1};
  int64_t index_data[] = {0, 1, 0, 1, 2, 2};
  const TensorView src(src_data, DType::Float32, {6});
  const TensorView index(index_data, DType::Int64, {6});
  Tensor out = Tensor::zeros({3}, DType::Float32);
  scatterx::scatter_reduce_(out, 0, index, src, scatterx::Reduce::Amax, /*include_self=*/false);

  // Rows 2 and 0 of a 3x2 table.
  float table_data[] = {0, 1, 10, 11, 20, 21};
  int64_t rows_data[] = {2, 0};
  const Tensor rows = scatterx::index_select(TensorView(table_data, DType::Float32, {3, 2}), 0,
                                             TensorView(rows_data, DType::Int64, {2}));

  const float* o = out.data_as<float>();
  const float* r = rows.data_as<float>();
  std::printf("scatter_reduce_ amax: [%g, %g, %g]\n", o[0], o[1], o[2]);        // [2, 7, 3]
  std::printf("index_select: [[%g, %g], [%g, %g]]\n", r[0], r[1], r[2], r[3]);  // [[20, 21], [0, 1]]
  return 0;
}
