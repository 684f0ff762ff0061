// A bounded soak of the distributed layer (issue 18): run under mpirun, e.g.
//   mpirun -n 4 --oversubscribe build/release/tests/dist/scatterx_dist_soak --seconds 180 --seed 7
// Options: --seconds N (default 180), --seed S (default 1), --max-bytes B
// (largest tensor of one op on one rank, default 32 MiB), --timeout T
// (the communicators' timeout in seconds, default 120).
//
// Every iteration draws, from (seed, iteration) alone, so that every rank
// draws the same: an op (every collective, point-to-point, barrier, or a
// local op), a group (the world, the even/odd split, the world without its
// last rank, the world in reverse order), a dtype, a reduce op, a size from
// 0 to --max-bytes (log-uniform, one in ten empty), a layout (contiguous,
// transposed, strided, flipped) and sync or async. Inputs are formulas of
// (group rank, element, iteration) (dist_test_util.h), so every result is
// checked against its closed form on the rank that received it, and nothing
// outside an output view may change. Async ops stay in flight across later
// iterations (and ops on other groups) and are checked once waited for.
//
// Rank 0 prints iterations, ops per kind, bytes moved (sum over ranks of
// each op's output bytes) and failures; the exit status is nonzero on any
// failure. An op that raises aborts the job (MPI_Abort) with its draw.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/gather/gather.h"
#include "tests/dist/dist_test_util.h"

// dist_test_util.cpp's harness hooks (gtest's DistTest), unused here.
namespace sxd {
std::vector<int> harness_ranks_with(bool) { return {}; }
void harness_barrier() {}
}  // namespace sxd

namespace {

using namespace sxd;
namespace dist = scatterx::dist;
using Clock = std::chrono::steady_clock;

// clang-format off
#define SOAK_KINDS(_) \
  _(all_reduce) \
  _(all_gather) \
  _(all_gather_into_tensor) \
  _(reduce_scatter) \
  _(reduce_scatter_tensor) \
  _(broadcast) \
  _(all_to_all) \
  _(all_to_all_single) \
  _(all_to_all_v) \
  _(barrier) \
  _(send_recv) \
  _(local_index_select)
// clang-format on

enum class Kind {
#define SOAK_ENUM(k) k,
  SOAK_KINDS(SOAK_ENUM)
#undef SOAK_ENUM
      count
};
const char* kind_name(Kind k) {
  static const char* names[] = {
#define SOAK_NAME(k) #k,
      SOAK_KINDS(SOAK_NAME)
#undef SOAK_NAME
  };
  return names[static_cast<int>(k)];
}
constexpr int kKinds = static_cast<int>(Kind::count);

struct Options {
  double seconds = 180;
  uint64_t seed = 1;
  int64_t max_bytes = int64_t{32} << 20;
  double timeout = 120;
};

// One iteration's draw: the same on every rank of the group.
struct Draw {
  int64_t it = 0;
  Kind kind = Kind::barrier;
  int group = 0;
  DType dtype = DType::Float32;
  ReduceOp op = ReduceOp::Sum;
  int64_t bytes = 0;
  int64_t cols = 1;
  Layout layout = Layout::Contiguous;
  bool async = false;
  int root = 0;
  std::vector<std::vector<int64_t>> splits;  // rows from group rank i to j
  int64_t salt = 0;

  std::string describe() const {
    return std::string("iteration ") + std::to_string(it) + " " + kind_name(kind) + " group " + std::to_string(group) +
           " " + scatterx::dtype_name(dtype) + " op " + op_label(op) + " bytes " + std::to_string(bytes) + " cols " +
           std::to_string(cols) + " layout " + layout_label(layout) + (async ? " async" : " sync") + " root " +
           std::to_string(root);
  }
};

Draw draw(const Options& o, int64_t it, const std::vector<int>& group_sizes) {
  std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(it));
  auto uniform = [&](int64_t n) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(n)); };
  Draw d;
  d.it = it;
  d.salt = uniform(1 << 20);
  d.kind = static_cast<Kind>(uniform(kKinds));
  d.group = static_cast<int>(uniform(static_cast<int64_t>(group_sizes.size())));
  const int gs = std::max(1, group_sizes[static_cast<size_t>(d.group)]);  // 0: not a member
  const auto& dtypes = test_dtypes();
  d.dtype = dtypes[static_cast<size_t>(uniform(static_cast<int64_t>(dtypes.size())))];
  const auto& ops = all_reduce_ops();
  do {
    d.op = ops[static_cast<size_t>(uniform(static_cast<int64_t>(ops.size())))];
  } while (!reduce_supported(d.op, d.dtype));
  const double max_log = std::log(static_cast<double>(std::max<int64_t>(2, o.max_bytes)));
  d.bytes = uniform(10) == 0 ? 0 : static_cast<int64_t>(std::exp(std::uniform_real_distribution<>(0, max_log)(rng)));
  static const int64_t col_choices[] = {1, 3, 16, 64};
  d.cols = col_choices[uniform(4)];
  d.layout = static_cast<Layout>(uniform(4));
  d.async = uniform(2) == 0;
  d.root = static_cast<int>(uniform(gs));
  // all-to-all splits: rows of each (sender, receiver) pair, so that the
  // largest input is about `bytes`
  const int64_t row_bytes = d.cols * scatterx::element_size(d.dtype);
  const int64_t max_rows = std::max<int64_t>(1, d.bytes / row_bytes / gs);
  d.splits.assign(static_cast<size_t>(gs), std::vector<int64_t>(static_cast<size_t>(gs), 0));
  for (auto& row : d.splits) {
    for (auto& s : row) s = uniform(5) == 0 ? 0 : uniform(max_rows + 1);
  }
  return d;
}

// A check to run once the op's Work completed; returns "" or what failed.
using Check = std::function<std::string()>;

// A Draw outlives the checks that refer to it: each Pending holds it.
using DrawPtr = std::shared_ptr<const Draw>;

struct Pending {
  DrawPtr d;
  Work work;
  Check check;
};

struct Ctx {
  const Communicator* comm = nullptr;
  int rank = 0;  // in the group
  int size = 1;
};

// Rows of a tensor of about `bytes` with d.cols columns.
int64_t rows_for(const Draw& d, int64_t bytes) { return bytes / (d.cols * scatterx::element_size(d.dtype)); }

Buf buf(const Draw& d, int64_t rows, const std::function<V(int64_t)>& f = nullptr) {
  Buf b = make_buf({rows, d.cols}, d.dtype, d.layout);
  if (f) fill(b.view, f);
  b.take_snapshot();
  return b;
}

// "" when `b` holds f and nothing outside its view changed.
std::string verify(const Buf& b, const std::function<V(int64_t)>& f, const std::string& what) {
  auto r = holds(b.view, f);
  if (!r) return what + ": " + r.message();
  auto u = b.unchanged_outside_view();
  if (!u) return what + " (outside the view): " + u.message();
  return "";
}

// Runs `sync` or queues `async_call`, then the check (now or at the drain).
void issue(const DrawPtr& dp, const std::function<void()>& sync, const std::function<Work()>& async_call, Check check,
           std::vector<Pending>& pending) {
  if (dp->async) {
    pending.push_back({dp, async_call(), std::move(check)});
  } else {
    sync();
    pending.push_back({dp, Work(), std::move(check)});
  }
}

// Bytes this rank's output of the op holds (the "bytes moved" tally).
void run_reductions(const DrawPtr& dp, const Ctx& c, std::vector<Pending>& pending, int64_t& bytes) {
  const Draw& d = *dp;
  const auto ranks = iota_ranks(c.size);
  const auto in = [&d, r = c.rank](int64_t i) { return reduce_input(d.op, d.dtype, r, i + d.salt); };
  const auto out = [&d, ranks](int64_t offset) {
    return [&d, ranks, offset](int64_t i) { return reduce_expected(d.op, d.dtype, ranks, i + offset + d.salt); };
  };
  if (d.kind == Kind::all_reduce) {
    auto b = std::make_shared<Buf>(buf(d, rows_for(d, d.bytes), in));
    bytes += b->view.numel() * b->view.element_size();
    issue(
        dp, [&] { dist::all_reduce(b->view, d.op, *c.comm); },
        [&] { return dist::all_reduce_async(b->view, d.op, *c.comm); },
        [b, f = out(0)] { return verify(*b, f, "tensor"); }, pending);
    return;
  }
  const int64_t rows = rows_for(d, d.bytes / c.size);
  const int64_t block = rows * d.cols;
  auto o = std::make_shared<Buf>(buf(d, rows));
  bytes += block * o->view.element_size();
  Check check = [o, f = out(c.rank * block)] { return verify(*o, f, "output"); };
  if (d.kind == Kind::reduce_scatter_tensor) {
    auto b = std::make_shared<Buf>(buf(d, rows * c.size, in));
    issue(
        dp, [&] { dist::reduce_scatter_tensor(o->view, b->view, d.op, *c.comm); },
        [&] { return dist::reduce_scatter_tensor_async(o->view, b->view, d.op, *c.comm); },
        [b, check] { return check(); }, pending);
    return;
  }
  auto inputs = std::make_shared<std::vector<Buf>>();
  std::vector<TensorView> views;
  for (int k = 0; k < c.size; ++k) {
    inputs->push_back(buf(d, rows, [&in, k, block](int64_t i) { return in(k * block + i); }));
    views.push_back(inputs->back().view);
  }
  issue(
      dp, [&] { dist::reduce_scatter(o->view, views, d.op, *c.comm); },
      [&] { return dist::reduce_scatter_async(o->view, views, d.op, *c.comm); }, [inputs, check] { return check(); },
      pending);
}

void run_gathers(const DrawPtr& dp, const Ctx& c, std::vector<Pending>& pending, int64_t& bytes) {
  const Draw& d = *dp;
  const int64_t rows = rows_for(d, d.kind == Kind::broadcast ? d.bytes : d.bytes / c.size);
  const int64_t block = rows * d.cols;
  const auto plain = [&d](int r) { return [&d, r](int64_t i) { return plain_value(d.dtype, r, i + d.salt); }; };
  auto in = std::make_shared<Buf>(buf(d, rows, plain(c.rank)));
  const int64_t es = in->view.element_size();
  if (d.kind == Kind::broadcast) {
    bytes += block * es;
    issue(
        dp, [&] { dist::broadcast(in->view, d.root, *c.comm); },
        [&] { return dist::broadcast_async(in->view, d.root, *c.comm); },
        [in, f = plain(d.root)] { return verify(*in, f, "tensor"); }, pending);
    return;
  }
  bytes += block * es * c.size;
  if (d.kind == Kind::all_gather_into_tensor) {
    auto o = std::make_shared<Buf>(buf(d, rows * c.size));
    const auto f = [&d, block](int64_t i) {
      return plain_value(d.dtype, static_cast<int>(i / block), i % block + d.salt);
    };
    issue(
        dp, [&] { dist::all_gather_into_tensor(o->view, in->view, *c.comm); },
        [&] { return dist::all_gather_into_tensor_async(o->view, in->view, *c.comm); },
        [in, o, f] { return verify(*o, f, "output"); }, pending);
    return;
  }
  auto outs = std::make_shared<std::vector<Buf>>();
  std::vector<TensorView> views;
  for (int k = 0; k < c.size; ++k) {
    outs->push_back(buf(d, rows));
    views.push_back(outs->back().view);
  }
  issue(
      dp, [&] { dist::all_gather(views, in->view, *c.comm); },
      [&] { return dist::all_gather_async(views, in->view, *c.comm); },
      [in, outs, plain] {
        for (size_t k = 0; k < outs->size(); ++k) {
          std::string e = verify((*outs)[k], plain(static_cast<int>(k)), "outputs[" + std::to_string(k) + "]");
          if (!e.empty()) return e;
        }
        return std::string();
      },
      pending);
}

// Element e of the rows that group rank `from` sends to `to`.
V a2a_value(const Draw& d, int from, int to, int64_t e) {
  return plain_value(d.dtype, from, to * 1000003 + e + d.salt);
}

void run_all_to_alls(const DrawPtr& dp, const Ctx& c, std::vector<Pending>& pending, int64_t& bytes) {
  const Draw& d = *dp;
  const auto& send = d.splits[static_cast<size_t>(c.rank)];
  std::vector<int64_t> recv;
  for (int i = 0; i < c.size; ++i) recv.push_back(d.splits[static_cast<size_t>(i)][static_cast<size_t>(c.rank)]);
  // one Buf per peer (the list form), or the concatenation
  auto blocks = [&](const std::vector<int64_t>& rows, bool sending) {
    auto v = std::make_shared<std::vector<Buf>>();
    for (int p = 0; p < c.size; ++p) {
      const int from = sending ? c.rank : p, to = sending ? p : c.rank;
      v->push_back(
          buf(d, rows[static_cast<size_t>(p)],
              sending ? [&d, from, to](int64_t e) { return a2a_value(d, from, to, e); } : std::function<V(int64_t)>()));
    }
    return v;
  };
  auto concat_rows = [&](const std::vector<int64_t>& rows, bool sending) {
    int64_t total = 0;
    for (int64_t r : rows) total += r;
    auto f = [&d, rows, me = c.rank, sending](int64_t i) {
      const int64_t row_elems = d.cols;
      int p = 0;
      int64_t e = i;
      while (e >= rows[static_cast<size_t>(p)] * row_elems) e -= rows[static_cast<size_t>(p++)] * row_elems;
      return sending ? a2a_value(d, me, p, e) : a2a_value(d, p, me, e);
    };
    return std::make_pair(total, std::function<V(int64_t)>(f));
  };
  if (d.kind == Kind::all_to_all) {
    auto ins = blocks(send, true), outs = blocks(recv, false);
    std::vector<TensorView> iv, ov;
    for (auto& b : *ins) iv.push_back(b.view);
    for (auto& b : *outs) {
      ov.push_back(b.view);
      bytes += b.view.numel() * b.view.element_size();
    }
    issue(
        dp, [&] { dist::all_to_all(ov, iv, *c.comm); }, [&] { return dist::all_to_all_async(ov, iv, *c.comm); },
        [&d, ins, outs, me = c.rank] {
          for (size_t p = 0; p < outs->size(); ++p) {
            std::string e =
                verify((*outs)[p], [&d, p, me](int64_t i) { return a2a_value(d, static_cast<int>(p), me, i); },
                       "outputs[" + std::to_string(p) + "]");
            if (!e.empty()) return e;
          }
          return std::string();
        },
        pending);
    return;
  }
  const auto [in_rows, in_f] = concat_rows(send, true);
  const auto out_concat = concat_rows(recv, false);
  const int64_t out_rows = out_concat.first;
  const std::function<V(int64_t)> out_f = out_concat.second;
  auto in = std::make_shared<Buf>(buf(d, in_rows, in_f));
  bytes += out_rows * d.cols * in->view.element_size();
  if (d.kind == Kind::all_to_all_v) {
    dist::AllToAllVResult r = dist::all_to_all_v(in->view, send, *c.comm);
    auto out = std::make_shared<Buf>();
    out->base = r.output;
    out->view = r.output;
    out->take_snapshot();
    std::string e = r.recv_splits == recv ? "" : "recv_splits differ from the drawn splits";
    pending.push_back({dp, Work(), [out, out_f, e] { return e.empty() ? verify(*out, out_f, "output") : e; }});
    return;
  }
  auto out = std::make_shared<Buf>(buf(d, out_rows));
  issue(
      dp, [&] { dist::all_to_all_single(out->view, in->view, recv, send, *c.comm); },
      [&] { return dist::all_to_all_single_async(out->view, in->view, recv, send, *c.comm); },
      [in, out, out_f] { return verify(*out, out_f, "output"); }, pending);
}

// isend to the next group rank, irecv from the previous (one ring step).
void run_send_recv(const DrawPtr& dp, const Ctx& c, std::vector<Pending>& pending, int64_t& bytes) {
  const Draw& d = *dp;
  const int64_t rows = rows_for(d, d.bytes);
  const int next = (c.rank + 1) % c.size, prev = (c.rank + c.size - 1) % c.size;
  const auto plain = [&d](int r) { return [&d, r](int64_t i) { return plain_value(d.dtype, r, i + d.salt); }; };
  auto in = std::make_shared<Buf>(buf(d, rows, plain(c.rank)));
  auto out = std::make_shared<Buf>(buf(d, rows));
  bytes += in->view.numel() * in->view.element_size();
  const int tag = static_cast<int>(d.salt % 1000);
  Work r = dist::irecv(out->view, prev, *c.comm, tag);
  Work s = dist::isend(in->view, next, *c.comm, tag);
  pending.push_back({dp, s, [in] { return std::string(); }});
  pending.push_back({dp, r, [out, f = plain(prev)] { return verify(*out, f, "received"); }});
}

// A local op between the collectives: index_select of rows.
std::string run_local(const Draw& d, const Ctx& c) {
  const int64_t rows = rows_for(d, d.bytes);
  const auto plain = [&d, r = c.rank](int64_t i) { return plain_value(d.dtype, r, i + d.salt); };
  Buf x = buf(d, rows, plain);
  const int64_t picks = rows == 0 ? 0 : 2 * rows + 1;
  Tensor index = make({picks}, DType::Int64, [&](int64_t j) {
    return V{static_cast<double>((j * 7 + d.salt) % rows), 0};
  });
  Tensor y = scatterx::index_select(x.view, 0, index);
  const int64_t cols = d.cols, salt = d.salt;
  auto r = holds(y, [&](int64_t i) { return plain(((i / cols) * 7 + salt) % rows * cols + i % cols); });
  return r ? "" : std::string("index_select: ") + r.message();
}

}  // namespace

namespace {

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--seconds") {
      o.seconds = std::stod(value);
    } else if (flag == "--seed") {
      o.seed = std::stoull(value);
    } else if (flag == "--max-bytes") {
      o.max_bytes = std::stoll(value);
    } else if (flag == "--timeout") {
      o.timeout = std::stod(value);
    } else {
      throw std::invalid_argument("unknown option " + flag);
    }
  }
  if (argc % 2 == 0) throw std::invalid_argument(std::string("option ") + argv[argc - 1] + " needs a value");
  return o;
}

struct Tally {
  std::array<int64_t, kKinds> ops{};
  int64_t bytes = 0;
  int64_t failures = 0;
};

// Waits for every pending op and checks its result.
void drain(std::vector<Pending>& pending, int world_rank, Tally& tally) {
  for (Pending& p : pending) {
    p.work.wait();
    const std::string error = p.check();
    if (error.empty()) continue;
    ++tally.failures;
    std::fprintf(stderr, "[rank %d] FAILED %s: %s\n", world_rank, p.d->describe().c_str(), error.c_str());
  }
  pending.clear();
}

void run_one(const DrawPtr& dp, const Ctx& c, std::vector<Pending>& pending, Tally& tally, int world_rank) {
  switch (dp->kind) {
    case Kind::all_reduce:
    case Kind::reduce_scatter:
    case Kind::reduce_scatter_tensor:
      run_reductions(dp, c, pending, tally.bytes);
      break;
    case Kind::all_gather:
    case Kind::all_gather_into_tensor:
    case Kind::broadcast:
      run_gathers(dp, c, pending, tally.bytes);
      break;
    case Kind::all_to_all:
    case Kind::all_to_all_single:
    case Kind::all_to_all_v:
      run_all_to_alls(dp, c, pending, tally.bytes);
      break;
    case Kind::barrier:
      dist::barrier(*c.comm);
      break;
    case Kind::send_recv:
      run_send_recv(dp, c, pending, tally.bytes);
      break;
    case Kind::local_index_select: {
      const std::string error = run_local(*dp, c);
      if (!error.empty()) {
        ++tally.failures;
        std::fprintf(stderr, "[rank %d] FAILED %s: %s\n", world_rank, dp->describe().c_str(), error.c_str());
      }
      break;
    }
    case Kind::count:
      break;
  }
  ++tally.ops[static_cast<size_t>(dp->kind)];
}

int64_t sum_over_ranks(int64_t v) {
  int64_t all = 0;
  MPI_Allreduce(&v, &all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

// Rank 0 prints the totals; returns the failures over all ranks.
int64_t report(const Options& o, int64_t iterations, const Tally& t, double seconds, int world_rank, int world_size) {
  const int64_t bytes = sum_over_ranks(t.bytes), failures = sum_over_ranks(t.failures);
  if (world_rank == 0) {
    std::printf("soak: %d ranks, seed %llu, max bytes %lld, %.1f s\n", world_size,
                static_cast<unsigned long long>(o.seed), static_cast<long long>(o.max_bytes), seconds);
    std::printf("soak: iterations %lld\n", static_cast<long long>(iterations));
    for (int k = 0; k < kKinds; ++k) {
      std::printf("soak:   %-24s %lld (on rank 0)\n", kind_name(static_cast<Kind>(k)),
                  static_cast<long long>(t.ops[static_cast<size_t>(k)]));
    }
    std::printf("soak: bytes moved %lld (%.2f GiB, sum over ranks of the ops' outputs)\n",
                static_cast<long long>(bytes), static_cast<double>(bytes) / (1 << 30));
    std::printf("soak: failures %lld\n", static_cast<long long>(failures));
    std::fflush(stdout);
  }
  return failures;
}

int soak(const Options& o) {
  dist::CommunicatorOptions copts;
  copts.timeout = std::chrono::duration<double>(o.timeout);
  Communicator world = Communicator::world(copts);
  set_world(&world);
  const int wr = world.rank(), ws = world.size();
  // the groups: world, even/odd ranks, all but the last rank, world reversed
  std::vector<Communicator> groups = {world, world.split(wr % 2, wr), world.split(wr < ws - 1 || ws == 1 ? 0 : -1, wr),
                                      world.split(0, ws - wr)};
  std::vector<int> sizes;  // this rank's view of each group's size (any member agrees)
  for (const Communicator& g : groups) sizes.push_back(g.valid() ? g.size() : 0);
  Tally tally;
  std::vector<Pending> pending;
  const auto start = Clock::now();
  int64_t it = 0;
  for (bool stop = false; !stop; ++it) {
    const DrawPtr dp = std::make_shared<const Draw>(draw(o, it, sizes));
    const Communicator& g = groups[static_cast<size_t>(dp->group)];
    if (g.valid()) {
      try {
        run_one(dp, Ctx{&g, g.rank(), g.size()}, pending, tally, wr);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[rank %d] %s raised: %s\n", wr, dp->describe().c_str(), e.what());
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
    }
    if (pending.size() > 3 || it % 5 == 4) drain(pending, wr, tally);
    if (it % 16 == 15) {  // rank 0's clock decides, for everyone
      int done = std::chrono::duration<double>(Clock::now() - start).count() >= o.seconds ? 1 : 0;
      dist::broadcast(TensorView(&done, DType::Int32, {}), 0, world);
      stop = done != 0;
    }
  }
  drain(pending, wr, tally);
  const int64_t failures = report(o, it, tally, std::chrono::duration<double>(Clock::now() - start).count(), wr, ws);
  set_world(nullptr);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scatterx_dist_soak: %s\nusage: %s [--seconds N] [--seed S] [--max-bytes B] [--timeout T]\n",
                 e.what(), argv[0]);
    return 2;
  }
  Communicator::ensure_mpi_initialized();
  return soak(o);
}
