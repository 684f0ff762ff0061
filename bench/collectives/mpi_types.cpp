#include "mpi_types.h"

#include <cstdio>

#include "ops/numeric.h"
#include "world.h"

namespace scatterx_bench_collectives {

namespace sx = scatterx;

void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float s = sx::detail::bfloat16_bits_to_float(a[i]) + sx::detail::bfloat16_bits_to_float(b[i]);
    b[i] = sx::detail::float_to_bfloat16_bits(s);
  }
}

MpiTypes mpi_types(sx::DType dtype) {
  MpiTypes t;
  switch (dtype) {
    case sx::DType::Float32:
      t.type = MPI_FLOAT;
      break;
    case sx::DType::Float64:
      t.type = MPI_DOUBLE;
      break;
    case sx::DType::BFloat16:
      t.type = MPI_UINT16_T;
      MPI_Op_create(&bf16_sum, /*commute=*/1, &t.sum);
      t.user_op = true;
      break;
    default:
      break;
  }
  return t;
}

int as_int(int64_t v, const char* what) {
  if (v > INT32_MAX) {
    std::fprintf(stderr, "rank %d: %s = %lld does not fit MPI's int counts\n", g_rank, what, static_cast<long long>(v));
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return static_cast<int>(v);
}

}  // namespace scatterx_bench_collectives
