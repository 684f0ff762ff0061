// The native side's datatypes: the MPI_Datatype and the sum MPI_Op of each
// benchmarked dtype. MPI has no bfloat16 type, so bfloat16 travels as
// MPI_UINT16_T and is summed by a user-defined MPI_Op (convert to float, add,
// round to nearest even).
#pragma once

#include <mpi.h>

#include <cstdint>

#include "ops/dtype.h"

namespace scatterx_bench_collectives {

struct MpiTypes {
  MPI_Datatype type = MPI_FLOAT;
  MPI_Op sum = MPI_SUM;
  bool user_op = false;  // `sum` was created here: MPI_Op_free it when done
};

MpiTypes mpi_types(scatterx::DType dtype);

// The user-defined MPI_Op's function: inout[i] = bfloat16(float(in[i]) + float(inout[i])).
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype* type);

// v as an MPI int count; a count that does not fit aborts every rank (named by `what`).
int as_int(int64_t v, const char* what);

}  // namespace scatterx_bench_collectives
