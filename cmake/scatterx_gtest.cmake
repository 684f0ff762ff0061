# GoogleTest for the test suites, from the first of:
#   1. an installed GoogleTest (Debian's libgtest-dev; -DGTest_ROOT=PREFIX
#      points at another install);
#   2. a source tree built with the project: -DSCATTERX_GTEST_SOURCE_DIR=DIR,
#      else /usr/src/googletest where Debian's googletest package put one.
#      This is how an air-gapped GPU node gets it: scripts/gpu_bundle.sh
#      carries the source (scripts/gpu_suite.sh --deps passes it here).
# Either way the suites link GTest::gtest and GTest::gtest_main.
set(SCATTERX_GTEST_SOURCE_DIR "" CACHE PATH
  "GoogleTest source tree to build with the tests when no installed GoogleTest is found")

if(NOT SCATTERX_GTEST_SOURCE_DIR)
  find_package(GTest QUIET)
endif()
if(NOT GTest_FOUND)
  set(_scatterx_gtest_src "${SCATTERX_GTEST_SOURCE_DIR}")
  if(NOT _scatterx_gtest_src AND EXISTS /usr/src/googletest/CMakeLists.txt)
    set(_scatterx_gtest_src /usr/src/googletest)
  endif()
  if(NOT EXISTS "${_scatterx_gtest_src}/CMakeLists.txt")
    message(FATAL_ERROR "scatterx tests: expected GoogleTest installed (Debian: libgtest-dev; or -DGTest_ROOT=PREFIX) "
      "or a source tree (-DSCATTERX_GTEST_SOURCE_DIR=DIR), got neither "
      "(SCATTERX_GTEST_SOURCE_DIR='${SCATTERX_GTEST_SOURCE_DIR}'); -DSCATTERX_BUILD_TESTS=OFF builds without tests")
  endif()
  message(STATUS "scatterx tests: GoogleTest built from ${_scatterx_gtest_src}")
  set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  add_subdirectory("${_scatterx_gtest_src}" "${PROJECT_BINARY_DIR}/_deps/googletest" EXCLUDE_FROM_ALL)
  if(NOT TARGET GTest::gtest)
    add_library(GTest::gtest ALIAS gtest)
    add_library(GTest::gtest_main ALIAS gtest_main)
  endif()
endif()
