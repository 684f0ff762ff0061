// The MPI side of the environment report (ops/runtime/build_info.h has the
// rest): which MPI library this process loaded and whether it moves CUDA
// device memory itself.
//
// Safe to call at any time: before MPI_Init (the library version can be
// asked then), while MPI runs, and after MPI_Finalize. It never initializes
// MPI; CUDA-awareness is asked of the running library only while MPI is
// initialized, and the row says so otherwise.
#pragma once

#include "ops/runtime/build_info.h"

namespace scatterx::dist {

struct MpiInfo {
  std::string library_version;  // MPI_Get_library_version, its lines joined by "; "
  std::string standard;         // the MPI standard the library implements, e.g. "3.1"
  bool initialized = false;     // MPI_Init has run and MPI_Finalize has not
  // "yes", "no" or "unknown": the library's build as its mpi-ext.h
  // declares it (Open MPI's MPIX_CUDA_AWARE_SUPPORT; other MPIs cannot tell).
  std::string cuda_aware_build;
  // MPIX_Query_cuda_support() of the library loaded, when MPI is initialized:
  // "yes" or "no"; else "unknown (...)" saying why it was not asked.
  std::string cuda_aware_runtime;
};

MpiInfo mpi_info();

// (name, value) rows in print order, and the same as "name: value" lines.
ReportRows mpi_rows(const MpiInfo& info);
std::string format_mpi_info(const MpiInfo& info);

}  // namespace scatterx::dist
