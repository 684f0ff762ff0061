#include "cases.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "data.h"
#include "limits.h"
#include "world.h"

namespace scatterx_bench_collectives {

void checked_call(Env& env, Check& c, const std::function<void()>& fn) {
  const bool was = env.comm.checks();
  env.comm.set_checks(true);
  try {
    fn();
  } catch (const std::exception& e) {
    c.error = 1;
    c.message = e.what();
  }
  env.comm.set_checks(was);
}

namespace {

namespace sx = scatterx;
namespace sxd = scatterx::dist;

constexpr int64_t kRowElems = 16;  // elements per row of the all-to-all inputs

// The result check of a case writing into `out`: scatterx's call, then the
// native one, each from `prepare()` (NaN-poisoning or restoring the buffer),
// compared (bit for bit when `exact`).
std::function<void(Check&)> compare_runs(Env* e, const Case& c, sx::Tensor* out, sx::Tensor* ref, bool exact,
                                         std::function<void()> prepare) {
  return [e, out, ref, exact, prepare, sxf = c.sx, mpif = c.mpi](Check& ck) {
    prepare();
    checked_call(*e, ck, sxf);
    std::memcpy(ref->data(), out->data(), nbytes(*out));
    prepare();
    mpif();
    if (!ck.error) compare(*ref, *out, exact, ck);
  };
}

Case make_reduce_scatter(Env& env, int64_t size) {
  struct B {
    sx::Tensor in, out, ref;
  };
  auto b = std::make_shared<B>();
  const int64_t n = std::max<int64_t>(1, size / (env.esize * g_ws));
  b->in = sx::Tensor::empty({g_ws * n}, env.dtype);
  fill(b->in, 1000 + static_cast<uint64_t>(g_rank));
  b->out = touched({n}, env.dtype);
  b->ref = touched({n}, env.dtype);
  Case c;
  c.op = "reduce_scatter";
  c.bytes = g_ws * n * env.esize;
  c.count = n;
  c.bus_factor = static_cast<double>(g_ws - 1) / g_ws;
  c.exact = false;
  B* p = b.get();
  Env* e = &env;
  const int cnt = as_int(n, "reduce_scatter count");
  c.sx = [p, e] { sxd::reduce_scatter_tensor(p->out, p->in, sxd::ReduceOp::Sum, e->comm); };
  c.mpi = [p, e, cnt] {
    MPI_Reduce_scatter_block(p->in.data(), p->out.data(), cnt, e->types.type, e->types.sum, e->native);
  };
  c.verify = compare_runs(e, c, &p->out, &p->ref, false, [p] { poison(p->out); });
  c.keep = b;
  return c;
}

Case make_all_gather(Env& env, int64_t size) {
  struct B {
    sx::Tensor in, out, ref;
  };
  auto b = std::make_shared<B>();
  const int64_t n = std::max<int64_t>(1, size / (env.esize * g_ws));
  b->in = sx::Tensor::empty({n}, env.dtype);
  fill(b->in, 2000 + static_cast<uint64_t>(g_rank));
  b->out = touched({g_ws * n}, env.dtype);
  b->ref = touched({g_ws * n}, env.dtype);
  Case c;
  c.op = "all_gather";
  c.bytes = g_ws * n * env.esize;
  c.count = n;
  c.bus_factor = static_cast<double>(g_ws - 1) / g_ws;
  B* p = b.get();
  Env* e = &env;
  const int cnt = as_int(n, "all_gather count");
  c.sx = [p, e] { sxd::all_gather_into_tensor(p->out, p->in, e->comm); };
  c.mpi = [p, e, cnt] {
    MPI_Allgather(p->in.data(), cnt, e->types.type, p->out.data(), cnt, e->types.type, e->native);
  };
  c.verify = compare_runs(e, c, &p->out, &p->ref, true, [p] { poison(p->out); });
  c.keep = b;
  return c;
}

Case make_all_reduce(Env& env, int64_t size) {
  struct B {
    sx::Tensor pristine, buf, ref;
  };
  auto b = std::make_shared<B>();
  const int64_t n = std::max<int64_t>(1, size / env.esize);
  b->pristine = sx::Tensor::empty({n}, env.dtype);
  fill(b->pristine, 3000 + static_cast<uint64_t>(g_rank));
  b->buf = touched({n}, env.dtype);
  b->ref = touched({n}, env.dtype);
  Case c;
  c.op = "all_reduce";
  c.bytes = n * env.esize;
  c.count = n;
  c.bus_factor = 2.0 * (g_ws - 1) / g_ws;
  c.exact = false;
  B* p = b.get();
  Env* e = &env;
  const int cnt = as_int(n, "all_reduce count");
  c.sx = [p, e] { sxd::all_reduce(p->buf, sxd::ReduceOp::Sum, e->comm); };
  c.mpi = [p, e, cnt] { MPI_Allreduce(MPI_IN_PLACE, p->buf.data(), cnt, e->types.type, e->types.sum, e->native); };
  c.reset = [p] { std::memcpy(p->buf.data(), p->pristine.data(), nbytes(p->buf)); };
  c.verify = compare_runs(e, c, &p->buf, &p->ref, false, c.reset);
  c.keep = b;
  return c;
}

// Uneven splits: rank r sends u * ((r + j) % ws + 1) rows to rank j (and so receives
// u * ((j + r) % ws + 1) rows from rank j).
struct Splits {
  std::vector<int64_t> send_rows, recv_rows;
  std::vector<int> send_counts, send_displs, recv_counts, recv_displs;  // elements, for MPI
  int64_t rows = 0;                                                     // sent = received, per rank
};

Splits make_splits(int64_t u) {
  Splits s;
  int64_t so = 0, ro = 0;
  for (int j = 0; j < g_ws; ++j) {
    const int64_t rows = u * ((g_rank + j) % g_ws + 1);
    s.send_rows.push_back(rows);
    s.recv_rows.push_back(rows);  // (j + r) % ws == (r + j) % ws
    s.send_counts.push_back(as_int(rows * kRowElems, "all-to-all count"));
    s.recv_counts.push_back(as_int(rows * kRowElems, "all-to-all count"));
    s.send_displs.push_back(as_int(so * kRowElems, "all-to-all displacement"));
    s.recv_displs.push_back(as_int(ro * kRowElems, "all-to-all displacement"));
    so += rows;
    ro += rows;
  }
  s.rows = so;
  return s;
}

struct AllToAllBuffers {
  sx::Tensor in, out, ref;
  Splits s;
  sx::Tensor last;  // all_to_all_v's latest result
  std::vector<int64_t> last_splits;
};

std::string join(const std::vector<int64_t>& v) {
  std::ostringstream m;
  for (size_t i = 0; i < v.size(); ++i) m << (i ? ", " : "") << v[i];
  return m.str();
}

// all_to_all_v's result check: it allocates its output and works out the
// receive splits, so both are checked before the values (against MPI's result
// in the preallocated `out`).
std::function<void(Check&)> all_to_all_v_check(AllToAllBuffers* p, Env* e, const Case& c) {
  return [p, e, sxf = c.sx, mpif = c.mpi](Check& ck) {
    p->last = sx::Tensor();
    checked_call(*e, ck, sxf);
    poison(p->out);
    mpif();
    if (ck.error) return;
    if (p->last_splits != p->s.recv_rows) {
      ck.error = 1;
      ck.message =
          "all_to_all_v returned recv_splits [" + join(p->last_splits) + "], expected [" + join(p->s.recv_rows) + "]";
      return;
    }
    if (p->last.sizes() != p->out.sizes() || p->last.dtype() != p->out.dtype() || !p->last.is_contiguous()) {
      ck.error = 1;
      ck.message = "all_to_all_v returned " + p->last.str() + ", expected " + p->out.str();
      return;
    }
    compare(p->last, p->out, true, ck);
    p->last = sx::Tensor();
  };
}

Case make_all_to_all(Env& env, int64_t size, bool v) {
  auto b = std::make_shared<AllToAllBuffers>();
  const int64_t units = static_cast<int64_t>(g_ws) * (g_ws + 1) / 2;
  const int64_t u = std::max<int64_t>(1, size / (env.esize * kRowElems * units));
  b->s = make_splits(u);
  b->in = sx::Tensor::empty({b->s.rows, kRowElems}, env.dtype);
  fill(b->in, 4000 + static_cast<uint64_t>(g_rank));
  b->out = touched({b->s.rows, kRowElems}, env.dtype);
  b->ref = touched({b->s.rows, kRowElems}, env.dtype);
  Case c;
  c.op = v ? "all_to_all_v" : "all_to_all_single";
  c.bytes = b->s.rows * kRowElems * env.esize;
  c.count = b->s.rows * kRowElems;
  c.bus_factor = static_cast<double>(g_ws - 1) / g_ws;
  AllToAllBuffers* p = b.get();
  Env* e = &env;
  c.mpi = [p, e] {
    MPI_Alltoallv(p->in.data(), p->s.send_counts.data(), p->s.send_displs.data(), e->types.type, p->out.data(),
                  p->s.recv_counts.data(), p->s.recv_displs.data(), e->types.type, e->native);
  };
  if (v) {
    c.sx = [p, e] {
      sxd::AllToAllVResult r = sxd::all_to_all_v(p->in, p->s.send_rows, e->comm);
      p->last = std::move(r.output);
      p->last_splits = std::move(r.recv_splits);
    };
    c.reset = [p] { p->last = sx::Tensor(); };
    c.verify = all_to_all_v_check(p, e, c);
  } else {
    c.sx = [p, e] { sxd::all_to_all_single(p->out, p->in, p->s.recv_rows, p->s.send_rows, e->comm); };
    c.verify = compare_runs(e, c, &p->out, &p->ref, true, [p] { poison(p->out); });
  }
  c.keep = b;
  return c;
}

Case make_broadcast(Env& env, int64_t size) {
  struct B {
    sx::Tensor buf, ref;
  };
  auto b = std::make_shared<B>();
  const int64_t n = std::max<int64_t>(1, size / env.esize);
  b->buf = sx::Tensor::empty({n}, env.dtype);
  fill(b->buf, 3000);  // the same on every rank: whatever the root sends, the result is the fill
  b->ref = touched({n}, env.dtype);
  Case c;
  c.op = "broadcast";
  c.bytes = n * env.esize;
  c.count = n;
  c.bus_factor = 1;
  B* p = b.get();
  Env* e = &env;
  const int cnt = as_int(n, "broadcast count");
  c.sx = [p, e] { sxd::broadcast(p->buf, 0, e->comm); };
  c.mpi = [p, e, cnt] { MPI_Bcast(p->buf.data(), cnt, e->types.type, 0, e->native); };
  c.verify = compare_runs(e, c, &p->buf, &p->ref, true, [p] {
    if (g_rank != 0) poison(p->buf);
  });
  c.keep = b;
  return c;
}

}  // namespace

Case make_case(Env& env, const std::string& op, int64_t size) {
  if (op == "reduce_scatter") return make_reduce_scatter(env, size);
  if (op == "all_gather") return make_all_gather(env, size);
  if (op == "all_reduce") return make_all_reduce(env, size);
  if (op == "all_to_all_v") return make_all_to_all(env, size, true);
  if (op == "broadcast") return make_broadcast(env, size);
  if (op == "copy") return make_copy(env, size);
  if (op == "peer_copy") return make_peer_copy(env, size);
  if (op == "all_reduce_copies") return make_all_reduce_copies(env, size);
  return make_all_to_all(env, size, false);
}

}  // namespace scatterx_bench_collectives
