// The environment report's compiled half (ops/runtime/build_info.h,
// dist/mpi_info.h) for scatterx/info.py: rows of (name, value) strings, the
// same rows the C++ report prints.
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "ops/runtime/build_info.h"
#if SCATTERX_PY_WITH_DIST
#include "dist/mpi_info.h"
#endif

namespace nb = nanobind;

void register_info(nb::module_& m) {
  m.def(
      "build_info_rows", [] { return scatterx::build_rows(scatterx::build_info()); },
      "The build and run-time rows of scatterx::build_info() as (name, value) pairs.");
  m.def(
      "knob_rows", [] { return scatterx::knob_rows(scatterx::build_info()); },
      "One (variable, value) pair per SCATTERX_* knob, marked '(default)' or '(invalid: ...)'.");
#if SCATTERX_PY_WITH_DIST
  nb::module_ d = nb::borrow<nb::module_>(m.attr("dist"));
  d.def(
      "mpi_info_rows", [] { return scatterx::dist::mpi_rows(scatterx::dist::mpi_info()); },
      "The MPI library's rows of the environment report as (name, value) pairs; never initializes MPI.");
#endif
}
