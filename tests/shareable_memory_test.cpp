// Shareable tensor memory (ops/runtime/shareable_memory.h): which tensors
// live in memory files, that a second mapping of the file (what a peer rank
// makes through /proc/<pid>/fd) sees the tensor's bytes, slot reuse, and
// that a forked child gets a private copy, as with ordinary memory.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ops/runtime/shareable_memory.h"
#include "ops/tensor.h"

namespace {

namespace detail = scatterx::detail;
using scatterx::DType;
using scatterx::Tensor;

bool arena_disabled_by_environment() {
  const char* v = std::getenv("SCATTERX_SHAREABLE_HOST_BYTES");
  return v != nullptr && std::string(v) == "0";
}

// Skips where the arena cannot serve anything: the AddressSanitizer build,
// or SCATTERX_SHAREABLE_HOST_BYTES=0 (where nothing may be shareable).
bool arena_serves() {
  void* p = detail::shareable_allocate(detail::kShareableMinBytes);
  if (p == nullptr) return false;
  detail::shareable_free(p);
  return true;
}

TEST(ShareableMemoryTest, OffWhenTheEnvironmentSaysZero) {
  if (!arena_disabled_by_environment()) GTEST_SKIP() << "SCATTERX_SHAREABLE_HOST_BYTES is not 0 here";
  EXPECT_EQ(detail::shareable_allocate(detail::kShareableMinBytes), nullptr);
  EXPECT_FALSE(scatterx::host_shareable(Tensor::empty({int64_t{1} << 18}, DType::Float32)));
  EXPECT_EQ(detail::shareable_chunk_bytes(), 0u);
}

TEST(ShareableMemoryTest, MidSizedTensorsLiveInMemoryFiles) {
  if (!arena_serves()) GTEST_SKIP() << "arena off (AddressSanitizer build or SCATTERX_SHAREABLE_HOST_BYTES=0)";
  // 64 KiB to 8 MiB: shareable; below and above: the ordinary allocator.
  EXPECT_FALSE(scatterx::host_shareable(Tensor::empty({1000}, DType::Float32)));
  EXPECT_FALSE(scatterx::host_shareable(Tensor::empty({int64_t{16} << 20}, DType::UInt8)));
  for (int64_t bytes : {int64_t{64} << 10, (int64_t{100} << 10) + 4, int64_t{1} << 20, int64_t{8} << 20}) {
    Tensor t = Tensor::empty({bytes}, DType::UInt8);
    detail::ShareableRegion region;
    ASSERT_TRUE(detail::shareable_region(t.data(), static_cast<size_t>(bytes), &region)) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 4096, 0u) << "slots are page aligned";
    // What a peer does: map the file by its /proc path and read the tensor.
    std::memset(t.data(), 0, static_cast<size_t>(bytes));
    auto* bytes_of = static_cast<unsigned char*>(t.data());
    for (int64_t i = 0; i < bytes; i += 4093) bytes_of[i] = static_cast<unsigned char>(i % 251 + 1);
    const std::string path = "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(region.fd);
    FILE* file = std::fopen(path.c_str(), "rb");
    ASSERT_NE(file, nullptr) << path;
    void* mapped = mmap(nullptr, region.file_bytes, PROT_READ, MAP_SHARED, fileno(file), 0);
    std::fclose(file);
    ASSERT_NE(mapped, MAP_FAILED);
    EXPECT_EQ(std::memcmp(static_cast<char*>(mapped) + region.offset, t.data(), static_cast<size_t>(bytes)), 0)
        << bytes;
    munmap(mapped, region.file_bytes);
    // A view inside the tensor is shareable; a range past its chunk is not.
    EXPECT_TRUE(detail::shareable_region(bytes_of + 8, static_cast<size_t>(bytes - 8), &region));
    EXPECT_FALSE(detail::shareable_region(bytes_of, region.file_bytes + 1, &region));
  }
}

// scatterx::host_shareable, the public question (ops/tensor.h): the span of
// any view, whatever its strides, against the arena.
TEST(ShareableMemoryTest, HostShareableAsksAboutAViewsWholeSpan) {
  using scatterx::TensorView;
  const bool on = arena_serves();
  Tensor t = Tensor::empty({256, 1024}, DType::Float32);  // 1 MiB
  EXPECT_EQ(scatterx::host_shareable(t), on);
  auto* base = static_cast<float*>(t.data());
  // Rows 10..19, every third column; the same columns backwards; a transpose.
  EXPECT_EQ(scatterx::host_shareable(TensorView(base + 10 * 1024, DType::Float32, {10, 300}, {1024, 3})), on);
  EXPECT_EQ(scatterx::host_shareable(TensorView(base + 1023, DType::Float32, {1024}, {-1})), on);
  EXPECT_EQ(scatterx::host_shareable(TensorView(base, DType::Float32, {1024, 256}, {1, 1024})), on);
  // A span running past the 32 MiB chunk (the view's sizes say 40 MiB).
  EXPECT_FALSE(scatterx::host_shareable(TensorView(base, DType::Float32, {int64_t{10} << 20})));
  EXPECT_FALSE(scatterx::host_shareable(Tensor::empty({1000}, DType::Float32)));              // below 64 KiB
  EXPECT_FALSE(scatterx::host_shareable(Tensor::empty({int64_t{3} << 20}, DType::Float32)));  // 12 MiB
  EXPECT_FALSE(scatterx::host_shareable(TensorView(base, DType::Float32, {0, 1024})));        // no bytes
  std::vector<float> foreign(1 << 18);
  EXPECT_FALSE(scatterx::host_shareable(TensorView(foreign.data(), DType::Float32, {1 << 18})));
}

TEST(ShareableMemoryTest, FreedSlotsAreReusedBySizeClass) {
  if (!arena_serves()) GTEST_SKIP() << "arena off (AddressSanitizer build or SCATTERX_SHAREABLE_HOST_BYTES=0)";
  void* a = detail::shareable_allocate(size_t{300} << 10);
  ASSERT_NE(a, nullptr);
  const size_t chunks = detail::shareable_chunk_bytes();
  EXPECT_TRUE(detail::shareable_free(a));
  EXPECT_FALSE(detail::shareable_free(a)) << "a slot is freed once";
  // 290 KiB rounds to the same 320 KiB class (a quarter of 256 KiB steps).
  void* b = detail::shareable_allocate(size_t{290} << 10);
  EXPECT_EQ(a, b);
  EXPECT_EQ(detail::shareable_chunk_bytes(), chunks);
  EXPECT_TRUE(detail::shareable_free(b));
  int on_heap = 0;
  EXPECT_FALSE(detail::shareable_free(&on_heap));
}

// The child's copy is the parent's bytes at the fork; its writes stay its
// own, and its memory is not shareable any more.
TEST(ShareableMemoryTest, ForkedChildGetsAPrivateCopy) {
  if (!arena_serves()) GTEST_SKIP() << "arena off (AddressSanitizer build or SCATTERX_SHAREABLE_HOST_BYTES=0)";
  Tensor t = Tensor::empty({int64_t{1} << 16}, DType::Int32);  // 256 KiB
  ASSERT_TRUE(scatterx::host_shareable(t));
  auto* v = static_cast<int32_t*>(t.data());
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = static_cast<int32_t>(i);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(20);
    int bad = 0;
    for (int64_t i = 0; i < t.numel(); ++i) bad += v[i] != static_cast<int32_t>(i);
    for (int64_t i = 0; i < t.numel(); ++i) v[i] = -1;
    bad += scatterx::host_shareable(t) ? 1 : 0;
    Tensor fresh = Tensor::empty({int64_t{1} << 16}, DType::Int32);  // the child allocates as before
    bad += fresh.data() == nullptr ? 1 : 0;
    _exit(bad == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child saw other bytes, or its copy stayed shareable";
  int changed = 0;
  for (int64_t i = 0; i < t.numel(); ++i) changed += v[i] != static_cast<int32_t>(i);
  EXPECT_EQ(changed, 0) << "the child's writes reached the parent";
  EXPECT_TRUE(scatterx::host_shareable(t));
}

}  // namespace
