// Messages beyond 1 GiB (MPI counts are ints: the library sends them in
// pieces). A few GiB of memory in all and several seconds, so these run only
// when SCATTERX_DIST_LARGE=1 (the ctest entry dist_np2_large_messages, label
// "large"); otherwise they skip.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "tests/dist/dist_test_util.h"

namespace sxd {
namespace {

namespace dist = scatterx::dist;

constexpr int64_t kBig = (int64_t{1} << 30) + 4099;  // bytes: 1 GiB and an odd tail

unsigned char pattern(int r, int64_t k) { return static_cast<unsigned char>((r * 131 + k * 7 + (k >> 20)) & 0xff); }

void fill_pattern(const Tensor& t, int r) {
  auto* p = static_cast<unsigned char*>(t.data());
  const int64_t n = t.numel();
  for (int64_t k = 0; k < n; ++k) p[k] = pattern(r, k);
}

// First k with t[k] != pattern(r, offset + k), or -1.
int64_t first_mismatch(const TensorView& t, int r, int64_t offset) {
  const auto* p = static_cast<const unsigned char*>(t.data());
  const int64_t n = t.numel();
  for (int64_t k = 0; k < n; ++k) {
    if (p[k] != pattern(r, offset + k)) return k;
  }
  return -1;
}

class LargeMessageTest : public DistTest {
 protected:
  void SetUp() override {
    const char* env = std::getenv("SCATTERX_DIST_LARGE");
    if (env == nullptr || std::strcmp(env, "1") != 0) GTEST_SKIP() << "set SCATTERX_DIST_LARGE=1 to run";
  }
};

// Rank 0 sends kBig bytes to the last rank; everyone else sends a byte to
// every peer.
TEST_F(LargeMessageTest, AllToAllSingleBeyondOneGiB) {
  SXD_REQUIRE_WS2();
  const int last = ws() - 1;
  auto rows = [&](int from, int to) -> int64_t { return from == 0 && to == last ? kBig : 1; };
  std::vector<int64_t> sends, recvs;
  int64_t in_rows = 0, out_rows = 0;
  for (int p = 0; p < ws(); ++p) {
    sends.push_back(rows(rank(), p));
    recvs.push_back(rows(p, rank()));
    in_rows += sends.back();
    out_rows += recvs.back();
  }
  Tensor in = Tensor::empty({in_rows}, DType::UInt8);
  fill_pattern(in, rank());
  Tensor out = Tensor::zeros({out_rows}, DType::UInt8);
  dist::all_to_all_single(out, in, recvs, sends, comm());
  int64_t at = 0;
  for (int q = 0; q < ws(); ++q) {
    int64_t src = 0;
    for (int p = 0; p < rank(); ++p) src += rows(q, p);
    const int64_t bad = first_mismatch(out.slice(0, at, at + recvs[q]), q, src);
    EXPECT_EQ(bad, -1) << "block from rank " << q << " differs at byte " << bad;
    at += recvs[q];
  }
}

TEST_F(LargeMessageTest, BroadcastBeyondOneGiB) {
  Tensor t = Tensor::empty({kBig}, DType::UInt8);
  fill_pattern(t, rank());
  dist::broadcast(t, ws() - 1, comm());
  EXPECT_EQ(first_mismatch(t, ws() - 1, 0), -1);
}

// With two ranks the all-gather sends each block as one message.
TEST_F(LargeMessageTest, AllGatherIntoTensorBeyondOneGiB) {
  if (ws() > 2) GTEST_SKIP() << "memory: runs with at most two ranks";
  Tensor in = Tensor::empty({kBig}, DType::UInt8);
  fill_pattern(in, rank());
  Tensor out = Tensor::empty({ws() * kBig}, DType::UInt8);
  dist::all_gather_into_tensor(out, in, comm());
  for (int r = 0; r < ws(); ++r) {
    EXPECT_EQ(first_mismatch(out.slice(0, r * kBig, (r + 1) * kBig), r, 0), -1) << "block of rank " << r;
  }
}

// A point-to-point message beyond 1 GiB is one MPI message (a derived
// datatype), so an any-source receive takes all of it from one sender.
TEST_F(LargeMessageTest, AnySourceReceiveBeyondOneGiB) {
  SXD_REQUIRE_WS2();
  if (rank() == 1) {
    Tensor t = Tensor::empty({kBig}, DType::UInt8);
    fill_pattern(t, rank());
    dist::send(t, 0, comm(), 2);
  } else if (rank() == 0) {
    Tensor t = Tensor::zeros({kBig}, DType::UInt8);
    EXPECT_EQ(dist::recv(t, dist::kAnySource, comm(), 2), 1);
    EXPECT_EQ(first_mismatch(t, 1, 0), -1);
  }
}

}  // namespace
}  // namespace sxd
