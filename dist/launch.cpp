// Launching a collective (launch.h): the local checks, the metadata
// exchange that makes every rank raise the same error, and the queueing of
// the body in call order.
#include "dist/launch.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "dist/p2p.h"
#include "ops/cuda.h"

namespace scatterx::dist {

namespace {

using detail::raise;

constexpr int64_t kMetaHeader = 4 + kMaxDims;

std::vector<Meta> exchange_meta(Communicator::State& s, Waiter& w, const Meta& mine, const char* op) {
  const int64_t n_values = static_cast<int64_t>(mine.values.size());
  const int64_t record = kMetaHeader + n_values;
  std::vector<int64_t> send(static_cast<size_t>(record));
  send[0] = mine.local_error;
  send[1] = mine.dtype;
  send[2] = mine.ndim;
  std::copy(mine.shape, mine.shape + kMaxDims, send.begin() + 3);
  send[3 + kMaxDims] = mine.extra;
  std::copy(mine.values.begin(), mine.values.end(), send.begin() + kMetaHeader);
  std::vector<int64_t> all(static_cast<size_t>(record * s.size));
  std::copy(send.begin(), send.end(), all.begin() + s.rank * record);
  // Point-to-point rather than MPI_Iallgather: a receive can be cancelled
  // when a peer never comes, a non-blocking collective cannot.
  std::vector<MPI_Request> reqs;
  const int bytes = static_cast<int>(record * static_cast<int64_t>(sizeof(int64_t)));
  for (int i = 1; i < s.size; ++i) {
    const int from = (s.rank - i + s.size) % s.size;
    post_recv(reinterpret_cast<char*>(all.data() + from * record), bytes, from, kMetaTag, s.comm, reqs, op);
  }
  for (int i = 1; i < s.size; ++i) {
    post_send(reinterpret_cast<const char*>(send.data()), bytes, (s.rank + i) % s.size, kMetaTag, s.comm, reqs, op);
  }
  w.wait_all(static_cast<int>(reqs.size()), reqs.data(),
             "every rank's metadata (does every rank call this collective?)");
  std::vector<Meta> metas(static_cast<size_t>(s.size));
  for (int r = 0; r < s.size; ++r) {
    const int64_t* p = all.data() + r * record;
    Meta& m = metas[static_cast<size_t>(r)];
    m.local_error = p[0];
    m.dtype = p[1];
    m.ndim = p[2];
    std::copy(p + 3, p + 3 + kMaxDims, m.shape);
    m.extra = p[3 + kMaxDims];
    m.values.assign(p + kMetaHeader, p + record);
  }
  for (int r = 0; r < s.size; ++r) {
    if (metas[static_cast<size_t>(r)].local_error != 0) {
      raise<MismatchError>(op, "rank ", r, " of ", s.size,
                           " rejected its arguments (see the error raised there); no data was exchanged");
    }
  }
  return metas;
}

std::string dtype_str(int64_t code) { return dtype_name(static_cast<DType>(code)); }

}  // namespace

std::vector<int64_t> padded(std::vector<int64_t> values, int ws) {
  values.resize(static_cast<size_t>(ws) * 2, 0);
  return values;
}

Meta dense_meta(const TensorView& t, int ws, int64_t extra) {
  Meta m;
  m.describe(t);
  m.extra = extra;
  m.values = padded({}, ws);
  return m;
}

void agree_on_tensor(const std::vector<Meta>& metas, const char* op, const char* arg, bool shapes) {
  for (size_t r = 1; r < metas.size(); ++r) {
    if (metas[r].dtype != metas[0].dtype) {
      raise<MismatchError>(op, "ranks disagree on ", arg, "'s dtype: rank 0 has ", dtype_str(metas[0].dtype), ", rank ",
                           r, " has ", dtype_str(metas[r].dtype));
    }
    if (shapes && !metas[r].same_shape(metas[0])) {
      raise<MismatchError>(op, "ranks disagree on ", arg, "'s shape: rank 0 has ", metas[0].shape_str(), ", rank ", r,
                           " has ", metas[r].shape_str());
    }
  }
}

void agree_on_reduce_op(const std::vector<Meta>& metas, const char* op) {
  for (size_t r = 1; r < metas.size(); ++r) {
    if (metas[r].extra != metas[0].extra)
      raise<MismatchError>(op, "ranks disagree on op: rank 0 has ",
                           reduce_op_name(static_cast<ReduceOp>(metas[0].extra)), ", rank ", r, " has ",
                           reduce_op_name(static_cast<ReduceOp>(metas[r].extra)));
  }
}

Work launch(const Communicator& comm, const char* op, bool async, bool exchange_always,
            const std::function<Meta()>& check, Body body) {
  Communicator::State& s = comm.state();
  s.check_usable(op);
  const bool exchange = exchange_always || s.checks.load();
  Meta mine;
  try {
    mine = check();
  } catch (const Error&) {
    if (!exchange) throw;
    // Tell the peers before raising, so they raise too instead of waiting.
    // The record length must match the peers' (see padded()).
    Meta failed;
    failed.local_error = 1;
    failed.values.assign(static_cast<size_t>(s.size) * 2, 0);
    const std::exception_ptr error = std::current_exception();
    try {
      s.submit(
           [&s, &failed, op] {
             Waiter w(s, op);
             s.next_tag();
             exchange_meta(s, w, failed, op);
           },
           false)
          .wait();
    } catch (const MismatchError&) {
      // expected: we told them ourselves
    }
    std::rethrow_exception(error);
  }
  // Copies of the communicator keep its state alive until the task ran. CUDA
  // tensors are staged on the stream current at the call, wherever the task
  // runs.
  void* stream = scatterx::cuda::current_stream();
  auto task = [comm, op, exchange, stream, mine = std::move(mine), body = std::move(body)] {
    const scatterx::cuda::StreamGuard on_callers_stream(stream);
    Communicator::State& st = comm.state();
    st.check_usable(op);
    Waiter w(st, op);
    const int tag = st.next_tag();
    if (exchange) {
      const std::vector<Meta> metas = exchange_meta(st, w, mine, op);
      body(st, w, tag, &metas);
    } else {
      body(st, w, tag, nullptr);
    }
  };
  return s.submit(std::move(task), async);
}

}  // namespace scatterx::dist
