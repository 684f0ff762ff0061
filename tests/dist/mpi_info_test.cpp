// dist::mpi_info() (dist/mpi_info.h) before MPI_Init, while MPI runs and
// after MPI_Finalize: one process (MPI can be initialized once), so its own
// executable, run under mpirun -n 1.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <gtest/gtest.h>

#include <string>

#include "dist/dist.h"
#include "dist/mpi_info.h"

namespace {

namespace dist = scatterx::dist;

void expect_library(const dist::MpiInfo& info) {
  EXPECT_EQ(info.standard, std::to_string(MPI_VERSION) + "." + std::to_string(MPI_SUBVERSION));
  EXPECT_EQ(info.library_version.find('\n'), std::string::npos);
#if defined(OMPI_MAJOR_VERSION)
  const std::string expected = "Open MPI v" + std::to_string(OMPI_MAJOR_VERSION) + "." +
                               std::to_string(OMPI_MINOR_VERSION) + "." + std::to_string(OMPI_RELEASE_VERSION);
  EXPECT_EQ(info.library_version.rfind(expected, 0), 0u) << info.library_version;
#else
  EXPECT_FALSE(info.library_version.empty());
#endif
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  EXPECT_EQ(info.cuda_aware_build, MPIX_CUDA_AWARE_SUPPORT ? "yes" : "no");
#else
  EXPECT_EQ(info.cuda_aware_build, "unknown");
#endif
}

TEST(MpiInfo, BeforeDuringAndAfterMpi) {
  const dist::MpiInfo before = dist::mpi_info();
  expect_library(before);
  EXPECT_FALSE(before.initialized);
  int initialized = 0;
  MPI_Initialized(&initialized);
  EXPECT_EQ(initialized, 0) << "mpi_info() must not initialize MPI";
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
  EXPECT_EQ(before.cuda_aware_runtime, "unknown (MPI is not initialized; asked only while it runs)");
#endif

  ASSERT_EQ(MPI_Init(nullptr, nullptr), MPI_SUCCESS);
  const dist::MpiInfo during = dist::mpi_info();
  expect_library(during);
  EXPECT_EQ(during.library_version, before.library_version);
  EXPECT_TRUE(during.initialized);
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
  EXPECT_EQ(during.cuda_aware_runtime, MPIX_Query_cuda_support() == 1 ? "yes" : "no");
  EXPECT_EQ(during.cuda_aware_runtime == "yes", dist::mpi_cuda_aware());
#else
  EXPECT_EQ(during.cuda_aware_runtime, "unknown (this MPI has no MPIX_Query_cuda_support)");
#endif
  const std::string text = dist::format_mpi_info(during);
  EXPECT_NE(text.find("MPI library: " + during.library_version + "\n"), std::string::npos) << text;
  EXPECT_NE(text.find("MPI initialized: yes\n"), std::string::npos) << text;

  ASSERT_EQ(MPI_Finalize(), MPI_SUCCESS);
  const dist::MpiInfo after = dist::mpi_info();
  EXPECT_FALSE(after.initialized);
  EXPECT_EQ(after.library_version, before.library_version);
}

}  // namespace
