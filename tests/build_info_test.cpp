// build_info() (ops/runtime/build_info.h): every field filled, knob rows
// generated from the registry, and the run-time values equal to what the
// library uses (OpenMP threads, the CPU kernels' ISA).
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdlib>
#include <sstream>
#include <string>

#include "ops/runtime/cpu_isa.h"
#include "ops/runtime/knobs.h"
#include "scatterx.h"
#include "tests/test_util.h"

namespace sxt {
namespace {

using scatterx::build_info;
using scatterx::BuildInfo;

TEST(BuildInfo, FieldsAreFilled) {
  const BuildInfo info = build_info();
  EXPECT_EQ(info.version, std::to_string(SCATTERX_VERSION_MAJOR) + "." + std::to_string(SCATTERX_VERSION_MINOR) + "." +
                              std::to_string(SCATTERX_VERSION_PATCH));
#if defined(__clang__)
  EXPECT_EQ(info.compiler.rfind("Clang " + std::to_string(__clang_major__) + ".", 0), 0u) << info.compiler;
#elif defined(__GNUC__)
  EXPECT_EQ(info.compiler.rfind("GNU " + std::to_string(__GNUC__) + ".", 0), 0u) << info.compiler;
#endif
  EXPECT_FALSE(info.build_type.empty());
  EXPECT_EQ(info.cuda_built, scatterx::cuda::is_built());
  EXPECT_EQ(info.cuda_devices, scatterx::cuda::device_count());
  if (info.cuda_built) {
    EXPECT_NE(info.cuda_architectures, "none");
    EXPECT_FALSE(info.cuda_architectures.empty());
    EXPECT_EQ(info.cuda_compiler.rfind("NVIDIA ", 0), 0u) << info.cuda_compiler;
  } else {
    EXPECT_EQ(info.cuda_architectures, "none");
    EXPECT_EQ(info.cuda_compiler, "none");
  }
  EXPECT_TRUE(info.openmp);
  EXPECT_FALSE(info.openmp_version.empty());
}

TEST(BuildInfo, OpenMpThreadsAreOmpGetMaxThreads) {
  const int before = omp_get_max_threads();
  EXPECT_EQ(build_info().openmp_max_threads, before);
  omp_set_num_threads(before + 2);
  EXPECT_EQ(build_info().openmp_max_threads, before + 2);
  omp_set_num_threads(before);
}

// The ISA the report names is the one the kernels dispatch to, and that one
// follows SCATTERX_CPU_ISA and the CPU (ctest runs this suite both ways).
TEST(BuildInfo, CpuIsaIsTheDispatchedOne) {
  const std::string isa = build_info().cpu_isa;
  EXPECT_EQ(isa, scatterx::detail::use_avx2() ? "avx2" : "baseline");
  const char* forced = std::getenv("SCATTERX_CPU_ISA");
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  const bool cpu_has_avx2 = __builtin_cpu_supports("avx2") != 0;
#else
  const bool cpu_has_avx2 = false;
#endif
  const bool baseline = forced != nullptr && std::string(forced) == "baseline";
  EXPECT_EQ(isa, cpu_has_avx2 && !baseline ? "avx2" : "baseline");
}

TEST(BuildInfo, OneKnobRowPerRegistryEntry) {
  int count = 0;
  const scatterx::detail::KnobSpec* knobs = scatterx::detail::all_knobs(&count);
  ScopedEnv timeout("SCATTERX_DIST_TIMEOUT", "7.5");
  ScopedEnv chunk("SCATTERX_DIST_CHUNK_BYTES", "64k");
  ScopedEnv streaming("SCATTERX_STREAMING_STORE_BYTES", nullptr);
  const scatterx::ReportRows rows = scatterx::knob_rows(build_info());
  ASSERT_EQ(static_cast<int>(rows.size()), count);
  for (int i = 0; i < count; ++i) EXPECT_EQ(rows[i].first, knobs[i].variable);
  const auto row = [&](scatterx::detail::Knob knob) { return rows[static_cast<int>(knob)].second; };
  EXPECT_EQ(row(scatterx::detail::Knob::DistTimeout), "7.5");
  EXPECT_EQ(row(scatterx::detail::Knob::StreamingStoreBytes), "33554432 (default)");
  EXPECT_EQ(row(scatterx::detail::Knob::DistChunkBytes),
            "64k (invalid: SCATTERX_DIST_CHUNK_BYTES: expected a whole number of bytes from 1 to 1099511627776, got "
            "'64k')");
}

// One "name: value" line per row: the build's, then the knobs'.
TEST(BuildInfo, TextHasOneLinePerRow) {
  const BuildInfo info = build_info();
  scatterx::ReportRows rows = scatterx::build_rows(info);
  const scatterx::ReportRows knobs = scatterx::knob_rows(info);
  rows.insert(rows.end(), knobs.begin(), knobs.end());
  std::istringstream text(scatterx::format_build_info(info));
  std::string line;
  size_t i = 0;
  for (; std::getline(text, line); ++i) {
    ASSERT_LT(i, rows.size()) << line;
    EXPECT_EQ(line, rows[i].first + ": " + rows[i].second);
    EXPECT_FALSE(rows[i].second.empty()) << rows[i].first;
  }
  EXPECT_EQ(i, rows.size());
  EXPECT_EQ(rows.front(), (std::pair<std::string, std::string>("scatterx", SCATTERX_VERSION)));
}

}  // namespace
}  // namespace sxt
