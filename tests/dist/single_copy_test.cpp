// The single-copy transport (dist/single_copy.h): every collective it serves
// (all_gather_into_tensor, all_gather, all_to_all_single, all_to_all_v,
// all_to_all, broadcast, all_reduce, reduce_scatter_tensor, reduce_scatter)
// run on three communicators: single_copy on with its control messages in
// the shared segment's slots, on with them as MPI messages (no segment), and
// off; each result checked against its closed form (values made from rank and
// position). Ranks whose calls or sizes disagree raise on every rank. Message sizes sit around the switch point
// (kSingleCopyMinBytes = 64 KiB), so that one call mixes pairs of both kinds;
// also odd and zero splits, strided views, in place, async.
#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "ops/runtime/knobs.h"
#include "tests/dist/dist_test_util.h"

namespace sxd {
namespace {

namespace dist = scatterx::dist;

constexpr int64_t kSwitch = int64_t{64} << 10;      // dist/single_copy.h's kSingleCopyMinBytes
constexpr int64_t kPairSwitch = int64_t{16} << 10;  // and kPairSingleCopyMinBytes (the all-to-alls')

// Int32 elements per message around the switch point, and a large one.
const std::vector<int64_t>& message_elements() {
  static const std::vector<int64_t> n = {kSwitch / 4 - 1, kSwitch / 4, kSwitch / 4 + 3, (int64_t{1} << 20) + 5};
  return n;
}

// Whether every rank of the world runs on this host (through plain MPI): the
// single-copy path is taken exactly then.
bool one_host() {
  char mine[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(mine, &length);
  std::vector<char> all(static_cast<size_t>(world().size()) * MPI_MAX_PROCESSOR_NAME);
  MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD);
  for (int r = 0; r < world().size(); ++r)
    if (std::string(&all[static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME]) != mine) return false;
  return true;
}

// More ranks than cores on this host: the single-copy paths' control then
// goes by MPI messages, not through the segment's slots (dist/single_copy.h).
bool oversubscribed() { return world().size() > sysconf(_SC_NPROCESSORS_ONLN); }

// Element i of rank r's data: distinct per rank and position, exact in int32.
V value(int r, int64_t i) { return {static_cast<double>(r * 10000000 + i % 5000000)}; }

class SingleCopyTest : public DistTest {
 protected:
  // The world with single_copy `on`, and the shared segment (whose slots
  // carry the single-copy paths' control messages) unless `segment` is off.
  Communicator with_single_copy(bool on, bool segment = true) const {
    dist::CommunicatorOptions o;
    o.single_copy = on;
    o.shared_memory = segment;
    return comm().split(0, rank(), o);
  }
  // The world with single copy and the segment on and the cross-rank
  // argument checks off: what the slots' own comparisons must catch.
  Communicator unchecked() const {
    dist::CommunicatorOptions o;
    o.single_copy = true;
    o.shared_memory = true;
    o.checks = false;
    return comm().split(0, rank(), o);
  }
  // Runs check(c, on) on three communicators: single copy on, with its
  // control in the segment's slots (where the ranks do not outnumber the
  // cores) and, without the segment, in MPI messages; and single copy off. Then checks which path each took (the
  // emulated device's runs take the device paths: no verdict).
  void both_paths(const std::function<void(const Communicator&, bool)>& check) const {
    namespace detail = scatterx::detail;
    const bool host_paths = detail::knob_choice(detail::Knob::DistEmulateDevice) == "off";
    for (const auto& [on, segment] : {std::pair{true, true}, std::pair{true, false}, std::pair{false, true}}) {
      const Communicator c = with_single_copy(on, segment);
      SCOPED_TRACE(segment ? "with the segment" : "without the segment");
      check(c, on);
      if (ws() == 1 || !host_paths) continue;
      ASSERT_TRUE(c.single_copy_path().has_value()) << "single_copy=" << on;
      EXPECT_EQ(*c.single_copy_path(), on && one_host()) << "single_copy=" << on;
    }
  }
};

TEST_F(SingleCopyTest, AllGatherIntoTensor) {
  both_paths([&](const Communicator& c, bool on) {
    for (int64_t n : message_elements()) {
      Tensor in = make({n}, DType::Int32, [&](int64_t i) { return value(rank(), i); });
      Tensor out = Tensor::zeros({ws() * n}, DType::Int32);
      dist::all_gather_into_tensor(out, in, c);
      EXPECT_TRUE(holds(out, [&](int64_t i) { return value(static_cast<int>(i / n), i % n); }))
          << n << " elements per rank, single_copy=" << on;
      // In place: the input is this rank's block of the output.
      Tensor inplace = Tensor::zeros({ws() * n}, DType::Int32);
      TensorView mine(static_cast<int32_t*>(inplace.data()) + rank() * n, DType::Int32, {n});
      fill(mine, [&](int64_t i) { return value(rank(), i); });
      dist::all_gather_into_tensor(inplace, mine, c);
      EXPECT_TRUE(holds(inplace, [&](int64_t i) { return value(static_cast<int>(i / n), i % n); }))
          << n << " elements per rank in place, single_copy=" << on;
    }
  });
}

// A strided input and a list mixing strided and contiguous outputs.
TEST_F(SingleCopyTest, AllGatherListStrided) {
  both_paths([&](const Communicator& c, bool on) {
    for (int64_t rows : {int64_t{127}, int64_t{129}, int64_t{2049}}) {  // 128 columns of int32: around 64 KiB
      const Shape shape{rows, 128};
      Buf in = make_buf(shape, DType::Int32, Layout::Transposed);
      fill(in.view, [&](int64_t i) { return value(rank(), i); });
      std::vector<Buf> bufs;
      std::vector<TensorView> outs;
      for (int r = 0; r < ws(); ++r) {
        bufs.push_back(make_buf(shape, DType::Int32, r % 2 ? Layout::Strided : Layout::Contiguous));
        bufs.back().take_snapshot();
      }
      for (Buf& b : bufs) outs.push_back(b.view);
      dist::all_gather(outs, in.view, c);
      for (int r = 0; r < ws(); ++r) {
        EXPECT_TRUE(holds(outs[static_cast<size_t>(r)], [&](int64_t i) { return value(r, i); }))
            << rows << " rows, block of rank " << r << ", single_copy=" << on;
        EXPECT_TRUE(bufs[static_cast<size_t>(r)].unchanged_outside_view());
      }
    }
  });
}

// Rows (of 16 int32, 64 bytes) rank r sends to rank p: 0, below, at and above
// the all-to-alls' switch point, and large, in a pattern where each rank
// mixes kinds.
int64_t rows_sent(int r, int p) {
  static const int64_t kinds[] = {0, kPairSwitch / 64 - 1, kPairSwitch / 64, 3 * kSwitch / 64 + 7, 1};
  return kinds[(r * 3 + p * 2 + 1) % 5];
}
constexpr int64_t kRowLen = 16;

// Element `col` of row `row` that rank r sends to rank p.
V sent_value(int r, int p, int64_t row, int64_t col) {
  return {static_cast<double>(r * 10000000 + p * 1000000 + row * kRowLen + col)};
}

// Rank r's all-to-all input (rows for rank 0, then rank 1...) and the output
// this rank expects.
Tensor a2a_input(int r, int ws) {
  int64_t rows = 0;
  for (int p = 0; p < ws; ++p) rows += rows_sent(r, p);
  std::vector<int64_t> first(static_cast<size_t>(ws) + 1, 0);
  for (int p = 0; p < ws; ++p) first[static_cast<size_t>(p) + 1] = first[static_cast<size_t>(p)] + rows_sent(r, p);
  return make({rows, kRowLen}, DType::Int32, [&](int64_t i) {
    int64_t row = i / kRowLen;
    int p = 0;
    while (row >= first[static_cast<size_t>(p) + 1]) ++p;
    return sent_value(r, p, row - first[static_cast<size_t>(p)], i % kRowLen);
  });
}
V a2a_expected(int me, int ws, int64_t i) {
  int64_t row = i / kRowLen;
  int q = 0;
  while (q < ws && row >= rows_sent(q, me)) row -= rows_sent(q++, me);
  return sent_value(q, me, row, i % kRowLen);
}

TEST_F(SingleCopyTest, AllToAllSingleAndVOddSplits) {
  both_paths([&](const Communicator& c, bool on) {
    std::vector<int64_t> send, recv;
    for (int p = 0; p < ws(); ++p) {
      send.push_back(rows_sent(rank(), p));
      recv.push_back(rows_sent(p, rank()));
    }
    const int64_t out_rows = std::accumulate(recv.begin(), recv.end(), int64_t{0});
    Tensor in = a2a_input(rank(), ws());
    Tensor out = Tensor::zeros({out_rows, kRowLen}, DType::Int32);
    dist::all_to_all_single(out, in, recv, send, c);
    EXPECT_TRUE(holds(out, [&](int64_t i) { return a2a_expected(rank(), ws(), i); }))
        << "all_to_all_single, single_copy=" << on;
    const dist::AllToAllVResult v = dist::all_to_all_v(in, send, c);
    EXPECT_EQ(v.recv_splits, recv);
    EXPECT_TRUE(holds(v.output, [&](int64_t i) { return a2a_expected(rank(), ws(), i); }))
        << "all_to_all_v, single_copy=" << on;
    // Every split zero.
    const dist::AllToAllVResult none = dist::all_to_all_v(Tensor::zeros({0, kRowLen}, DType::Int32),
                                                          std::vector<int64_t>(static_cast<size_t>(ws()), 0), c);
    EXPECT_EQ(none.output.size(0), 0);
  });
}

// Pairs of 16 to 64 KiB (kPairSwitch to kSwitch): each goes by single copy
// when the sender's bytes lie in shareable memory and as an MPI message when
// they do not, and the receiver takes either. Inputs in scatterx's tensors
// (shareable from 64 KiB), in a vector's memory, and mixed across the ranks.
TEST_F(SingleCopyTest, AllToAllMidSizedPairs) {
  both_paths([&](const Communicator& c, bool on) {
    auto rows = [](int r, int p) -> int64_t { return (r + p) % 2 == 0 ? 1000 : 300; };  // 64000 / 19200 bytes
    std::vector<int64_t> send, recv;
    std::vector<int64_t> first{0};
    for (int p = 0; p < ws(); ++p) {
      send.push_back(rows(rank(), p));
      recv.push_back(rows(p, rank()));
      first.push_back(first.back() + send.back());
    }
    auto input = [&](int64_t i) {
      const int64_t row = i / kRowLen;
      int p = 0;
      while (row >= first[static_cast<size_t>(p) + 1]) ++p;
      return sent_value(rank(), p, row - first[static_cast<size_t>(p)], i % kRowLen);
    };
    auto expected = [&](int64_t i) {
      int64_t row = i / kRowLen;
      int q = 0;
      while (row >= rows(q, rank())) row -= rows(q++, rank());
      return sent_value(q, rank(), row, i % kRowLen);
    };
    const int64_t in_rows = first.back();
    const int64_t out_rows = std::accumulate(recv.begin(), recv.end(), int64_t{0});
    Tensor shared_in = make({in_rows, kRowLen}, DType::Int32, input);
    std::vector<int32_t> foreign(static_cast<size_t>(in_rows * kRowLen));
    TensorView foreign_in(foreign.data(), DType::Int32, {in_rows, kRowLen});
    fill(foreign_in, input);
    for (int kind = 0; kind < 3; ++kind) {
      const bool foreign_here = kind == 1 || (kind == 2 && rank() == ws() - 1);
      const TensorView in = foreign_here ? foreign_in : TensorView(shared_in);
      Tensor out = Tensor::zeros({out_rows, kRowLen}, DType::Int32);
      dist::all_to_all_single(out, in, recv, send, c);
      EXPECT_TRUE(holds(out, expected)) << "inputs "
                                        << (kind == 0   ? "shareable"
                                            : kind == 1 ? "foreign"
                                                        : "mixed")
                                        << ", single_copy=" << on;
    }
  });
}

// The list form, one tensor per peer of the pattern's size.
TEST_F(SingleCopyTest, AllToAllLists) {
  both_paths([&](const Communicator& c, bool on) {
    std::vector<Tensor> ins, outs;
    std::vector<TensorView> in_views, out_views;
    for (int p = 0; p < ws(); ++p) {
      ins.push_back(make({rows_sent(rank(), p), kRowLen}, DType::Int32,
                         [&](int64_t i) { return sent_value(rank(), p, i / kRowLen, i % kRowLen); }));
      outs.push_back(Tensor::zeros({rows_sent(p, rank()), kRowLen}, DType::Int32));
      in_views.push_back(ins.back());
      out_views.push_back(outs.back());
    }
    dist::all_to_all(out_views, in_views, c);
    for (int q = 0; q < ws(); ++q) {
      EXPECT_TRUE(holds(outs[static_cast<size_t>(q)],
                        [&](int64_t i) { return sent_value(q, rank(), i / kRowLen, i % kRowLen); }))
          << "from rank " << q << ", single_copy=" << on;
    }
  });
}

TEST_F(SingleCopyTest, BroadcastFromEveryRoot) {
  both_paths([&](const Communicator& c, bool on) {
    for (int64_t n : message_elements()) {
      for (int root = 0; root < ws(); ++root) {
        Tensor t = make({n}, DType::Int32, [&](int64_t i) { return value(rank(), i); });
        dist::broadcast(t, root, c);
        EXPECT_TRUE(holds(t, [&](int64_t i) { return value(root, i); }))
            << n << " elements from " << root << ", single_copy=" << on;
      }
    }
    // A strided tensor: packed on the root, unpacked on the others.
    Buf b = make_buf({300, 64}, DType::Int32, Layout::Transposed);
    fill(b.view, [&](int64_t i) { return value(rank(), i); });
    dist::broadcast(b.view, ws() - 1, c);
    EXPECT_TRUE(holds(b.view, [&](int64_t i) { return value(ws() - 1, i); })) << "strided, single_copy=" << on;
  });
}

// Broadcasts of 512 KiB and more with SCATTERX_DIST_BROADCAST_ROOT_SHARE 1
// and 0: the root writes the last 1/ws of each peer's buffer unless its own
// lies in shareable memory (dist/single_copy_broadcast.cpp), or the peers
// read it all. Roots and peers in foreign memory (a vector's, as numpy's or
// torch's would be) and in tensors, lengths that split into no whole pages,
// and a tensor beyond the shareable arena (12 MiB); a foreign buffer's
// guard elements after the message stay untouched.
TEST_F(SingleCopyTest, BroadcastWithAndWithoutTheRootsShare) {
  constexpr int64_t kGuard = 1024;
  for (const char* share : {"1", "0"}) {
    // Read when the communicator is made.
    const Communicator c = [&] {
      sxt::ScopedEnv env("SCATTERX_DIST_BROADCAST_ROOT_SHARE", share);
      return comm().split(0, rank());
    }();
    for (int64_t n : {(int64_t{512} << 10) / 4, (int64_t{1} << 20) + 5, (int64_t{3} << 20) + 7}) {
      for (int root = 0; root < ws(); ++root) {
        for (bool foreign : {true, false}) {
          const std::string what = std::to_string(n) + " elements from " + std::to_string(root) +
                                   (foreign ? " in foreign memory" : " in a tensor") + ", root share " + share;
          std::vector<int32_t> vec;
          Tensor tensor;
          TensorView t;
          if (foreign) {
            vec.assign(static_cast<size_t>(n + kGuard), -7);
            t = TensorView(vec.data(), DType::Int32, {n});
          } else {
            tensor = Tensor::empty({n}, DType::Int32);
            t = tensor;
          }
          fill(t, [&](int64_t i) { return value(rank(), i); });
          dist::broadcast(t, root, c);
          EXPECT_TRUE(holds(t, [&](int64_t i) { return value(root, i); })) << what;
          for (size_t i = static_cast<size_t>(n); i < vec.size(); ++i) {
            if (vec[i] == -7) continue;
            ADD_FAILURE() << what << ": guard element " << i - static_cast<size_t>(n) << " overwritten";
            break;
          }
        }
      }
    }
  }
}

// Ranks that disagree on the root's share would take different protocols:
// making the communicator raises MismatchError on every rank instead.
TEST_F(SingleCopyTest, RootShareMustAgreeAcrossRanks) {
  SXD_REQUIRE_WS2();
  sxt::ScopedEnv env("SCATTERX_DIST_BROADCAST_ROOT_SHARE", rank() == 0 ? "0" : "auto");
  const std::string msg = error_message<MismatchError>([&] { (void)comm().split(0, rank()); });
  EXPECT_TRUE(mentions(msg, {"SCATTERX_DIST_BROADCAST_ROOT_SHARE"})) << msg;
}

// Queued collectives of every kind, waited for together: each keeps its
// inputs until its own peers are done reading them.
TEST_F(SingleCopyTest, AsyncQueue) {
  both_paths([&](const Communicator& c, bool on) {
    const int64_t n = (int64_t{1} << 18) + 1;
    Tensor in = make({n}, DType::Int32, [&](int64_t i) { return value(rank(), i); });
    Tensor gathered = Tensor::zeros({ws() * n}, DType::Int32);
    Tensor a2a_in = a2a_input(rank(), ws());
    int64_t out_rows = 0;
    std::vector<int64_t> send, recv;
    for (int p = 0; p < ws(); ++p) {
      send.push_back(rows_sent(rank(), p));
      recv.push_back(rows_sent(p, rank()));
      out_rows += recv.back();
    }
    Tensor a2a_out = Tensor::zeros({out_rows, kRowLen}, DType::Int32);
    Tensor b = make({n}, DType::Int32, [&](int64_t i) { return value(rank(), i); });
    std::vector<Work> works;
    works.push_back(dist::all_gather_into_tensor_async(gathered, in, c));
    works.push_back(dist::all_to_all_single_async(a2a_out, a2a_in, recv, send, c));
    works.push_back(dist::broadcast_async(b, 0, c));
    for (Work& w : works) w.wait();
    EXPECT_TRUE(holds(gathered, [&](int64_t i) { return value(static_cast<int>(i / n), i % n); })) << on;
    EXPECT_TRUE(holds(a2a_out, [&](int64_t i) { return a2a_expected(rank(), ws(), i); })) << on;
    EXPECT_TRUE(holds(b, [&](int64_t i) { return value(0, i); })) << on;
  });
}

// Empty blocks after the path was settled by a large all-gather.
TEST_F(SingleCopyTest, ZeroSizeBlocks) {
  both_paths([&](const Communicator& c, bool) {
    const int64_t n = int64_t{1} << 15;
    Tensor big = Tensor::zeros({n}, DType::Int32);
    Tensor gathered = Tensor::zeros({ws() * n}, DType::Int32);
    dist::all_gather_into_tensor(gathered, big, c);
    Tensor in = Tensor::zeros({0}, DType::Int32);
    Tensor out = Tensor::zeros({0}, DType::Int32);
    dist::all_gather_into_tensor(out, in, c);
    dist::broadcast(in, 0, c);
    EXPECT_EQ(out.numel(), 0);
  });
}

// all_reduce from 64 KiB: each rank folds its block out of its peers'
// tensors and writes it into theirs, wherever they lie: in scatterx's
// shareable memory (ops/runtime/shareable_memory.h: mapped, and with more
// ranks than cores left for the peers to copy), in memory scatterx did not
// allocate (a vector's, as numpy's or torch's would be: the kernel's copies),
// or in both across the ranks; past the arena's 8 MiB too. With single copy
// off: the segment's path. All against the closed form, for every op, odd
// lengths (uneven blocks) and a view that starts inside its tensor.
TEST_F(SingleCopyTest, AllReduceInSharedAndForeignMemory) {
  both_paths([&](const Communicator& c, bool on) {
    for (ReduceOp op : all_reduce_ops()) {
      for (DType dtype : {DType::Float32, DType::Int64, DType::BFloat16}) {
        if (!reduce_supported(op, dtype)) continue;
        // The arena's upper edge (just under 8 MiB of int64) and beyond it
        // (12 MiB) for sums only: the path is the same for every op and
        // dtype, and the big cases cost most of the sanitizer build's time.
        for (int64_t n : {kSwitch / 4 + 1, int64_t{100003}, (int64_t{8} << 20) / 8 - 16, (int64_t{12} << 20) / 8 + 5}) {
          if (n > 100003 && (op != ReduceOp::Sum || dtype != DType::Int64)) continue;
          const int64_t es = scatterx::element_size(dtype);
          auto input = [&](int64_t i) { return reduce_input(op, dtype, rank(), i); };
          auto expected = [&](int64_t i) { return reduce_expected(op, dtype, iota_ranks(ws()), i); };
          const std::string what = op_label(op) + " " + std::string(scatterx::dtype_name(dtype)) +
                                   " n=" + std::to_string(n) + " single_copy=" + std::to_string(on);
          Tensor t = make({n}, dtype, input);
          dist::all_reduce(t, op, c);
          EXPECT_TRUE(holds(t, expected)) << what;
          Tensor holder = Tensor::empty({n + 8}, dtype);
          TensorView inside(static_cast<char*>(holder.data()) + 8 * es, dtype, {n});
          fill(inside, input);
          dist::all_reduce(inside, op, c);
          EXPECT_TRUE(holds(inside, expected)) << what << " (a view inside its tensor)";
          std::vector<char> foreign(static_cast<size_t>(n * es));
          TensorView elsewhere(foreign.data(), dtype, {n});
          fill(elsewhere, input);
          dist::all_reduce(elsewhere, op, c);
          EXPECT_TRUE(holds(elsewhere, expected)) << what << " (every rank's memory foreign)";
          TensorView mixed = rank() == ws() - 1 ? elsewhere : TensorView(t);
          fill(mixed, input);
          dist::all_reduce(mixed, op, c);
          EXPECT_TRUE(holds(mixed, expected)) << what << " (the last rank's memory foreign)";
        }
      }
    }
  });
}

// reduce_scatter_tensor and reduce_scatter with blocks from 64 KiB: each
// rank folds its block straight out of its peers' inputs into its output,
// wherever the inputs lie: in shareable memory (mapped), in memory scatterx
// did not allocate (process_vm_readv), or both across the ranks. With
// single copy off: the segment's path. Every op, blocks around the switch
// point and past the arena's 8 MiB (sums only, as above), each against the
// closed form.
TEST_F(SingleCopyTest, ReduceScatterInSharedAndForeignMemory) {
  both_paths([&](const Communicator& c, bool on) {
    for (ReduceOp op : all_reduce_ops()) {
      for (DType dtype : {DType::Float32, DType::Int64, DType::BFloat16}) {
        if (!reduce_supported(op, dtype)) continue;
        const int64_t es = scatterx::element_size(dtype);
        for (int64_t n : {kSwitch / es - 1, kSwitch / es + 3, int64_t{100003}, (int64_t{12} << 20) / 8 / ws() + 5}) {
          if (n > 100003 && (op != ReduceOp::Sum || dtype != DType::Int64)) continue;
          const int64_t total = ws() * n;
          auto input = [&](int64_t i) { return reduce_input(op, dtype, rank(), i); };
          auto expected = [&](int64_t i) { return reduce_expected(op, dtype, iota_ranks(ws()), rank() * n + i); };
          const std::string what = op_label(op) + " " + std::string(scatterx::dtype_name(dtype)) +
                                   " n=" + std::to_string(n) + " single_copy=" + std::to_string(on);
          Tensor shared_in = make({total}, dtype, input);
          Tensor out = Tensor::zeros({n}, dtype);
          dist::reduce_scatter_tensor(out, shared_in, op, c);
          EXPECT_TRUE(holds(out, expected)) << what;
          std::vector<char> foreign(static_cast<size_t>(total * es));
          TensorView foreign_in(foreign.data(), dtype, {total});
          fill(foreign_in, input);
          std::vector<char> foreign_out(static_cast<size_t>(n * es));
          TensorView elsewhere(foreign_out.data(), dtype, {n});
          dist::reduce_scatter_tensor(elsewhere, foreign_in, op, c);
          EXPECT_TRUE(holds(elsewhere, expected)) << what << " (every rank's memory foreign)";
          fill(out, [](int64_t) { return V{0}; });
          dist::reduce_scatter_tensor(out, rank() == ws() - 1 ? foreign_in : TensorView(shared_in), op, c);
          EXPECT_TRUE(holds(out, expected)) << what << " (the last rank's input foreign)";
          if (n > kSwitch) continue;  // the list form packs its inputs first: one size suffices
          std::vector<Tensor> list;
          std::vector<TensorView> views;
          for (int r = 0; r < ws(); ++r) {
            list.push_back(make({n}, dtype, [&](int64_t i) { return input(r * n + i); }));
            views.emplace_back(list.back());
          }
          fill(out, [](int64_t) { return V{0}; });
          dist::reduce_scatter(out, views, op, c);
          EXPECT_TRUE(holds(out, expected)) << what << " (reduce_scatter of a list)";
        }
      }
    }
  });
}

// The folds' control messages go through the segment's slots, whose calls
// every rank compares with the argument checks off too: tensors whose sizes
// differ, and an all-reduce on one rank against a reduce-scatter of as many
// bytes on the others (which through MPI messages alone would look alike,
// and the all-reduce would write into the reduce-scatter's input), raise
// MismatchError on every rank; the communicator works afterwards.
TEST_F(SingleCopyTest, FoldsThatDifferRaiseEverywhere) {
  SXD_REQUIRE_WS2();
  if (scatterx::detail::knob_choice(scatterx::detail::Knob::DistEmulateDevice) != "off")
    GTEST_SKIP() << "the emulated device's runs take the device paths";
  const Communicator c = unchecked();
  const int64_t n = ws() * (kSwitch / 4 + 16);
  Tensor t = make({n}, DType::Int32, [&](int64_t i) { return value(rank(), i); });
  dist::all_reduce(t, ReduceOp::Sum, c);  // settles the paths
  if (!c.single_copy_path().value_or(false) || !c.shared_memory_path().value_or(false))
    GTEST_SKIP() << "single copy or the segment not available here";
  if (oversubscribed()) GTEST_SKIP() << "more ranks than cores: the control goes by MPI messages";
  Tensor longer = make({n + ws()}, DType::Int32, [&](int64_t i) { return value(rank(), i); });
  Tensor input = make({n}, DType::Int32, [&](int64_t i) { return value(rank(), i); });
  Tensor out = Tensor::zeros({n / ws()}, DType::Int32);
  const bool first = rank() == 0;
  std::string msg = error_message<MismatchError>([&] { dist::all_reduce(first ? t : longer, ReduceOp::Sum, c); });
  EXPECT_TRUE(mentions(msg, {"all_reduce", "bytes"})) << msg;
  msg = error_message<MismatchError>([&] {
    first ? dist::all_reduce(t, ReduceOp::Sum, c) : dist::reduce_scatter_tensor(out, input, ReduceOp::Sum, c);
  });
  EXPECT_TRUE(mentions(msg, {"different collectives", "single-copy all_reduce", "single-copy reduce_scatter"})) << msg;
  EXPECT_TRUE(holds(input, [&](int64_t i) { return value(rank(), i); })) << "the reduce-scatter's input was written";
  SCOPED_TRACE("the all-reduce after the mismatches");
  expect_all_reduce_works(c, n);
}

// Through the slots every rank sees what every pair's ends send and expect:
// with the argument checks off, splits that disagree (here rank 0 expects
// one row more from the last rank than it sends) raise MismatchError on
// every rank, before any byte moves, at every size: inline in the slot,
// as MPI messages past the slot's room, and by single copy. The
// communicator works afterwards.
TEST_F(SingleCopyTest, PairsThatDisagreeRaiseEverywhere) {
  SXD_REQUIRE_WS2();
  if (scatterx::detail::knob_choice(scatterx::detail::Knob::DistEmulateDevice) != "off")
    GTEST_SKIP() << "the emulated device's runs take the device paths";
  const Communicator c = unchecked();
  Tensor probe = Tensor::zeros({4}, DType::Float32);
  dist::all_reduce(probe, ReduceOp::Sum, c);  // settles the segment
  if (!c.shared_memory_path().value_or(false)) GTEST_SKIP() << "the segment is not available here";
  if (oversubscribed()) GTEST_SKIP() << "more ranks than cores: the control goes by MPI messages";
  for (int64_t rows : {int64_t{3}, 3 * kSwitch / 64 / 4, 2 * kSwitch / 64}) {  // 192 B, 48 KiB, 128 KiB per pair
    // The list form, whose sizes no metadata exchange compares with the
    // checks off; inputs in a vector's memory: never single copy below 64 KiB.
    std::vector<std::vector<int32_t>> in_mem;
    std::vector<Tensor> outs;
    std::vector<TensorView> ins, out_views;
    for (int p = 0; p < ws(); ++p) {
      in_mem.emplace_back(static_cast<size_t>(rows * kRowLen), 7);
      ins.emplace_back(in_mem.back().data(), DType::Int32, Shape{rows, kRowLen});
      const int64_t expected_rows = rows + (rank() == 0 && p == ws() - 1 ? 1 : 0);
      outs.push_back(make({expected_rows, kRowLen}, DType::Int32, [](int64_t) { return V{-1}; }));
      out_views.emplace_back(outs.back());
    }
    const std::string msg = error_message<MismatchError>([&] { dist::all_to_all(out_views, ins, c); });
    EXPECT_TRUE(
        mentions(msg, {"all_to_all", "rank " + std::to_string(ws() - 1) + " sends", "to rank 0", "which expects"}))
        << rows << " rows: " << msg;
    for (int p = 0; p < ws(); ++p) {
      EXPECT_TRUE(holds(outs[static_cast<size_t>(p)], [](int64_t) { return V{-1}; }))
          << rows << " rows: bytes from rank " << p << " moved before the raise";
    }
  }
  SCOPED_TRACE("the all-reduce after the mismatches");
  expect_all_reduce_works(c, 5);
}

// A rank whose peers cannot read its tensor (here: every block but its own
// behind PROT_NONE, which a peer's process_vm_readv finds unreadable and its
// process_vm_writev unwritable): the peers cannot fold their blocks, and
// every rank raises instead of returning a wrong result or waiting, in the
// all-reduce and in the reduce-scatter (whose input it is); the communicator
// works afterwards.
// Both ways of the control messages: the segment's slots (where the ranks do
// not outnumber the cores), MPI messages.
class UnreadablePeerTest : public SingleCopyTest, public ::testing::WithParamInterface<bool> {};

TEST_P(UnreadablePeerTest, ReducesRaiseEverywhere) {
  SXD_REQUIRE_WS2();
  if (scatterx::detail::knob_choice(scatterx::detail::Knob::DistEmulateDevice) != "off")
    GTEST_SKIP() << "the emulated device's runs take the device paths";
  const Communicator c = with_single_copy(true, GetParam());
  const int64_t page = sysconf(_SC_PAGESIZE);
  // Bytes per rank: blocks fall on page boundaries, and are large enough
  // (1 MiB) that the reduce-scatter folds them out of foreign memory.
  const int64_t block = std::max<int64_t>(page, int64_t{1} << 20);
  const int64_t n = ws() * block / 4;
  void* mem =
      mmap(nullptr, static_cast<size_t>(ws() * block), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  TensorView t(mem, DType::Int32, {n});
  Tensor out = Tensor::zeros({n / ws()}, DType::Int32);
  fill(t, [&](int64_t i) { return value(rank(), i); });
  dist::all_reduce(t, ReduceOp::Sum, c);  // settles the path
  if (!c.single_copy_path().value_or(false)) {
    munmap(mem, static_cast<size_t>(ws() * block));
    GTEST_SKIP() << "single copy not available here";
  }
  auto sum_of_values = [&](int64_t i) {
    double sum = 0;
    for (int r = 0; r < ws(); ++r) sum += value(r, i).re;
    return V{sum};
  };
  const std::vector<std::pair<std::string, std::function<void()>>> reduces = {
      {"all_reduce", [&] { dist::all_reduce(t, ReduceOp::Sum, c); }},
      {"reduce_scatter_tensor", [&] { dist::reduce_scatter_tensor(out, t, ReduceOp::Sum, c); }},
  };
  char* bytes = static_cast<char*>(mem);
  const size_t others = static_cast<size_t>((ws() - 1) * block);
  for (const auto& [name, run] : reduces) {
    if (rank() == 0) {
      ASSERT_EQ(mprotect(bytes + block, others, PROT_NONE), 0);
    }
    const std::string msg = error_message<scatterx::Error>(run);
    if (rank() == 0) {
      EXPECT_TRUE(mentions(msg, {name, "reduced block", "could not fold"})) << msg;
    } else {
      EXPECT_TRUE(mentions(msg, {name, "reading rank 0", "failed"})) << msg;
    }
    if (rank() == 0) {
      ASSERT_EQ(mprotect(bytes + block, others, PROT_READ | PROT_WRITE), 0);
    }
    fill(t, [&](int64_t i) { return value(rank(), i); });
    run();
    if (name == "all_reduce") {
      EXPECT_TRUE(holds(t, sum_of_values)) << name;
    } else {
      EXPECT_TRUE(holds(out, [&](int64_t i) { return sum_of_values(rank() * out.numel() + i); })) << name;
    }
  }
  munmap(mem, static_cast<size_t>(ws() * block));
}

INSTANTIATE_TEST_SUITE_P(Control, UnreadablePeerTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "Slots" : "Messages"; });

}  // namespace
}  // namespace sxd
