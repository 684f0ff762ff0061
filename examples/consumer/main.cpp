// Uses the installed package: headers under <prefix>/include/scatterx, the
// library and its OpenMP dependency through the exported scatterx::ops.
#include <cstdio>

#include "scatterx.h"

int main() {
  float table[] = {0, 1, 10, 11, 20, 21};
  int64_t rows[] = {2, 0, 2};
  const scatterx::Tensor picked = scatterx::index_select(scatterx::TensorView(table, scatterx::DType::Float32, {3, 2}),
                                                         0, scatterx::TensorView(rows, scatterx::DType::Int64, {3}));
  scatterx::Tensor sums = scatterx::Tensor::zeros({3, 2}, scatterx::DType::Float32);
  scatterx::index_add_(sums, 0, scatterx::TensorView(rows, scatterx::DType::Int64, {3}), picked);

  const float* s = sums.data_as<float>();
  const bool ok = s[0] == 0 && s[1] == 1 && s[2] == 0 && s[3] == 0 && s[4] == 40 && s[5] == 42 &&
                  scatterx::build_info().version == SCATTERX_VERSION;
  std::printf("scatterx %s from the installed package: index_select + index_add_ + build_info %s\n", SCATTERX_VERSION,
              ok ? "OK" : "WRONG");
  return ok ? 0 : 1;
}
