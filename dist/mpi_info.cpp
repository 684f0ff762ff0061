#include "dist/mpi_info.h"

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's extensions: MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support
#endif

#include <string>

namespace scatterx::dist {

namespace {

// MPICH's version text spans lines (version, date, device, configure
// options); the report keeps one row per field.
std::string one_line(const char* text) {
  std::string line;
  std::string current;
  for (const char* c = text;; ++c) {
    if (*c == '\n' || *c == '\0') {
      const size_t end = current.find_last_not_of(" \t\r");
      if (end != std::string::npos) line += (line.empty() ? "" : "; ") + current.substr(0, end + 1);
      current.clear();
      if (*c == '\0') break;
    } else {
      current += *c == '\t' ? ' ' : *c;
    }
  }
  return line;
}

bool mpi_running() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

const char* cuda_aware_build() {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  return MPIX_CUDA_AWARE_SUPPORT ? "yes" : "no";
#else
  return "unknown";
#endif
}

std::string cuda_aware_runtime(bool running) {
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
  if (!running) return "unknown (MPI is not initialized; asked only while it runs)";
  return MPIX_Query_cuda_support() == 1 ? "yes" : "no";
#else
  (void)running;
  return "unknown (this MPI has no MPIX_Query_cuda_support)";
#endif
}

}  // namespace

MpiInfo mpi_info() {
  MpiInfo info;
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(version, &length);  // allowed before MPI_Init and after MPI_Finalize
  info.library_version = one_line(version);
  int major = 0;
  int minor = 0;
  MPI_Get_version(&major, &minor);
  info.standard = std::to_string(major) + "." + std::to_string(minor);
  info.initialized = mpi_running();
  info.cuda_aware_build = cuda_aware_build();
  info.cuda_aware_runtime = cuda_aware_runtime(info.initialized);
  return info;
}

ReportRows mpi_rows(const MpiInfo& info) {
  return {
      {"MPI library", info.library_version},
      {"MPI standard", info.standard},
      {"MPI initialized", info.initialized ? "yes" : "no"},
      {"MPI CUDA-aware (build)", info.cuda_aware_build},
      {"MPI CUDA-aware (run time)", info.cuda_aware_runtime},
  };
}

std::string format_mpi_info(const MpiInfo& info) { return format_rows(mpi_rows(info)); }

}  // namespace scatterx::dist
