// How every collective runs:
//   1. it checks its local arguments (raising before any message);
//   2. when the metadata exchange is on, it all-gathers a small record per
//      rank (dtype, shape, split sizes, whether its local checks failed) so
//      that every rank detects the same disagreement and raises the same
//      error;
//   3. it moves the data with non-blocking calls polled against the deadline.
// launch() runs step 1 at the call and steps 2 and 3 in order with the
// communicator's other collectives, here or on its progress thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "dist/internal.h"

namespace scatterx::dist {

// What one rank says about its call. `values` holds op-specific numbers of
// the same length on every rank (split sizes, per-peer sizes).
struct Meta {
  int64_t local_error = 0;  // this rank's local checks failed
  int64_t dtype = 0;
  int64_t ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t extra = 0;  // op-specific scalar (e.g. broadcast's root, the reduce op)
  std::vector<int64_t> values;

  void describe(const TensorView& v) {
    dtype = static_cast<int64_t>(v.dtype());
    ndim = v.dim();
    for (int64_t d = 0; d < v.dim(); ++d) shape[d] = v.sizes()[d];
  }
  std::string shape_str() const {
    std::ostringstream s;
    s << "[";
    for (int64_t d = 0; d < ndim; ++d) s << (d ? ", " : "") << shape[d];
    s << "]";
    return s.str();
  }
  bool same_shape(const Meta& o) const { return ndim == o.ndim && std::equal(shape, shape + ndim, o.shape); }
};

// Every exchanged record carries 2 * world size values (zeros where the op
// has none), so a rank that failed its local checks can send a record of the
// same length without knowing what the op would have sent.
std::vector<int64_t> padded(std::vector<int64_t> values, int ws);

// The record of a collective over one tensor: t's dtype and shape, `extra`,
// and no values (padded to the common length).
Meta dense_meta(const TensorView& t, int ws, int64_t extra = 0);

// Every rank passed the same dtype (and, when `shapes`, the same shape).
void agree_on_tensor(const std::vector<Meta>& metas, const char* op, const char* arg, bool shapes);

// Every rank passed the same reduce op (carried in Meta::extra).
void agree_on_reduce_op(const std::vector<Meta>& metas, const char* op);

// The body of a collective, run in order on the communicator: gets the
// state, a waiter and (when the exchange ran) every rank's metadata.
using Body = std::function<void(Communicator::State&, Waiter&, int tag, const std::vector<Meta>*)>;

// Runs the local checks here and now; then queues (async) or runs (sync)
// the exchange and the body. `exchange_always` forces the metadata exchange.
Work launch(const Communicator& comm, const char* op, bool async, bool exchange_always,
            const std::function<Meta()>& check, Body body);

// launch()'s sync form for calls whose cost is mostly launch()'s own (the
// Work, the queued closure, the metadata record: a few allocations, as much
// as a 4-byte all-reduce on one host): when the cross-rank checks are off
// and no collective is queued or running, runs `body(state, waiter, tag)`
// here and returns true. Otherwise returns false and the caller launches.
// The caller has run its local checks.
template <typename Run>
bool run_now(const Communicator& comm, const char* op, Run&& body);

// run_now for a sync call on CPU tensors: runs `validate` here, then `body`
// when `small()` says the call takes the latency path. Returns false, having
// run nothing, for async or device calls and when the cross-rank checks are
// on (launch() must then see a local failure, to tell the peers).
template <typename Validate, typename Small, typename Run>
bool run_small_now(const Communicator& comm, const char* op, bool async, bool on_cpu, const Validate& validate,
                   const Small& small, Run&& body) {
  if (async || !on_cpu || comm.state().checks.load()) return false;
  validate();
  return small() && run_now(comm, op, std::forward<Run>(body));
}

template <typename Run>
bool run_now(const Communicator& comm, const char* op, Run&& body) {
  Communicator::State& s = comm.state();
  s.check_usable(op);
  if (s.checks.load() || !s.enter_inline()) return false;
  struct Leave {
    Communicator::State& s;
    ~Leave() { s.leave_inline(); }
  } leave{s};
  Waiter w(s, op);
  body(s, w, s.next_tag());
  return true;
}

}  // namespace scatterx::dist
