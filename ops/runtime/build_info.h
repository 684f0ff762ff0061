// What a bug report needs to know about this copy of scatterx: how it was
// built (version, compiler, CUDA backend and architectures) and what it
// does at run time (CPU ISA the kernels picked, OpenMP threads, every
// SCATTERX_* knob's value). dist/mpi_info.h adds the MPI side;
// `python -m scatterx.info` prints both with the Python packages' versions.
//
// Never throws for a bad knob value: the row says the value is invalid and
// why, as reading it would raise.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace scatterx {

struct KnobValue {
  std::string variable;   // SCATTERX_...
  std::string text;       // the environment's text, or the default's when unset or empty
  bool from_environment;  // false: the default
  std::string error;      // empty, or why the library would refuse `text`
};

struct BuildInfo {
  std::string version;             // SCATTERX_VERSION
  std::string compiler;            // CMake's compiler id and version, e.g. "GNU 12.2.0"
  std::string build_type;          // CMAKE_BUILD_TYPE ("unknown" where the generator has several)
  bool cuda_built = false;         // the CUDA backend is compiled in
  std::string cuda_architectures;  // CMAKE_CUDA_ARCHITECTURES, "none" without the backend
  std::string cuda_compiler;       // nvcc's version, "none" without the backend
  int cuda_devices = 0;            // cudaGetDeviceCount now (0 without the backend, a driver or a GPU)
  bool distributed_built = false;  // scatterx::dist (MPI) was configured with this build
  std::string cpu_isa;             // the CPU kernels' ISA: "avx2" or "baseline"
  bool openmp = false;             // compiled with OpenMP
  std::string openmp_version;      // e.g. "4.5"
  int openmp_max_threads = 1;      // omp_get_max_threads() now
  std::vector<KnobValue> knobs;    // every knob of ops/runtime/knobs.h, in its order
};

using ReportRows = std::vector<std::pair<std::string, std::string>>;

BuildInfo build_info();

// The report as (name, value) rows, in print order: build_rows without the
// knobs, knob_rows one per knob named by its variable.
ReportRows build_rows(const BuildInfo& info);
ReportRows knob_rows(const BuildInfo& info);

// Both as text, one "name: value" line per row.
std::string format_build_info(const BuildInfo& info);
std::string format_rows(const ReportRows& rows);

}  // namespace scatterx
