#include "limits.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "data.h"
#include "world.h"

namespace scatterx_bench_collectives {

namespace sx = scatterx;

Case make_copy(Env& env, int64_t size) {
  struct B {
    sx::Tensor in, out;
  };
  auto b = std::make_shared<B>();
  const int64_t n = std::max<int64_t>(1, size / (env.esize * g_ws)) * g_ws;
  b->in = sx::Tensor::empty({n}, env.dtype);
  fill(b->in, 4000);
  b->out = touched({n}, env.dtype);
  Case c;
  c.op = "copy";
  c.bytes = n * env.esize;
  c.count = n;
  c.bus_factor = static_cast<double>(g_ws - 1) / g_ws;
  B* p = b.get();
  c.sx = [p] { std::memcpy(p->out.data(), p->in.data(), nbytes(p->in)); };
  c.mpi = c.sx;
  c.verify = [](Check&) {};
  c.keep = b;
  return c;
}

// Both columns gather every rank's block (the peers' blocks across processes,
// its own by memcpy) into the same output. "cma": process_vm_readv straight out of each peer's private buffer (what
// scatterx's and Open MPI's single-copy transports do, with no handshake or
// completion note: the addresses are swapped once here). "shm": memcpy out of
// the peers' blocks in an MPI shared-memory window, the copy a transport could
// make if the user's buffers were mapped in every process (XPMEM). The
// columns are the limits the all-gather and all-to-all floors are held to.
Case make_peer_copy(Env& env, int64_t size) {
  struct B {
    sx::Tensor in, out, ref;
    MPI_Win win = MPI_WIN_NULL;
    MPI_Comm shared = MPI_COMM_NULL;
    std::vector<const char*> window_block;  // by rank
    std::vector<int64_t> pid;               // by rank
    std::vector<uint64_t> address;          // by rank: its `in`
    ~B() {
      if (win != MPI_WIN_NULL) MPI_Win_free(&win);
      if (shared != MPI_COMM_NULL) MPI_Comm_free(&shared);
    }
  };
  auto b = std::make_shared<B>();
  const int64_t n = std::max<int64_t>(1, size / (env.esize * g_ws));
  const int64_t block = n * env.esize;
  b->in = sx::Tensor::empty({n}, env.dtype);
  fill(b->in, 5000 + static_cast<uint64_t>(g_rank));
  b->out = touched({g_ws * n}, env.dtype);
  b->ref = touched({g_ws * n}, env.dtype);
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &b->shared);
  int shared_size = 0;
  MPI_Comm_size(b->shared, &shared_size);
  const bool one_host = shared_size == g_ws;
  b->window_block.assign(static_cast<size_t>(g_ws), nullptr);
  if (one_host) {
    char* mine = nullptr;
    MPI_Win_allocate_shared(block, 1, MPI_INFO_NULL, b->shared, &mine, &b->win);
    std::memcpy(mine, b->in.data(), static_cast<size_t>(block));
    for (int q = 0; q < g_ws; ++q) {
      MPI_Aint len = 0;
      int unit = 0;
      char* base = nullptr;
      MPI_Win_shared_query(b->win, q, &len, &unit, &base);
      b->window_block[static_cast<size_t>(q)] = base;
    }
    MPI_Barrier(MPI_COMM_WORLD);  // every window block is written
  }
  const int64_t mine[2] = {static_cast<int64_t>(getpid()),
                           static_cast<int64_t>(reinterpret_cast<uintptr_t>(b->in.data()))};
  std::vector<int64_t> all(static_cast<size_t>(2 * g_ws));
  MPI_Allgather(mine, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, MPI_COMM_WORLD);
  for (int q = 0; q < g_ws; ++q) {
    b->pid.push_back(all[static_cast<size_t>(2 * q)]);
    b->address.push_back(static_cast<uint64_t>(all[static_cast<size_t>(2 * q + 1)]));
  }
  Case c;
  c.op = "peer_copy";
  c.bytes = g_ws * block;
  c.count = n;
  c.bus_factor = static_cast<double>(g_ws - 1) / g_ws;
  B* p = b.get();
  c.sx = [p, block, one_host] {
    if (!one_host) throw std::runtime_error("peer_copy: the ranks are not all on one host");
    char* out = static_cast<char*>(p->out.data());
    for (int i = 0; i < g_ws; ++i) {
      const int q = (g_rank + i) % g_ws;  // own block first, then the peers from the next one on
      char* dst = out + q * block;
      if (q == g_rank) {
        std::memcpy(dst, p->in.data(), static_cast<size_t>(block));
        continue;
      }
      int64_t done = 0;
      while (done < block) {  // process_vm_readv may copy less than asked
        iovec local{dst + done, static_cast<size_t>(block - done)};
        iovec remote{reinterpret_cast<void*>(p->address[static_cast<size_t>(q)] + static_cast<uint64_t>(done)),
                     static_cast<size_t>(block - done)};
        const ssize_t got =
            process_vm_readv(static_cast<pid_t>(p->pid[static_cast<size_t>(q)]), &local, 1, &remote, 1, 0);
        if (got <= 0)
          throw std::runtime_error("peer_copy: process_vm_readv failed: " + std::string(std::strerror(errno)));
        done += got;
      }
    }
  };
  c.mpi = [p, block, one_host] {
    if (!one_host) return;
    char* out = static_cast<char*>(p->out.data());
    for (int i = 0; i < g_ws; ++i) {
      const int q = (g_rank + i) % g_ws;
      const char* from = q == g_rank ? static_cast<const char*>(p->in.data()) : p->window_block[static_cast<size_t>(q)];
      std::memcpy(out + q * block, from, static_cast<size_t>(block));
    }
  };
  // Each column against the gathered blocks as their ranks filled them.
  c.verify = [e = &env, p, n, sxf = c.sx, mpif = c.mpi](Check& ck) {
    for (int q = 0; q < g_ws; ++q) fill(p->ref.slice(0, q * n, (q + 1) * n), 5000 + static_cast<uint64_t>(q));
    for (const auto& column : {sxf, mpif}) {
      poison(p->out);
      checked_call(*e, ck, column);
      if (!ck.error) compare(p->out, p->ref, true, ck);
    }
  };
  c.keep = b;
  return c;
}

constexpr int64_t kWordsPerTile = 1024;  // the fold's accumulator: 4 KiB, in L1
// The three steps go chunk by chunk, as a pipelined transport's do: 64 KiB chunks ran up to 7% faster than
// 512 KiB chunks or whole blocks (2026-11-29).
constexpr int64_t kChunkBytes = int64_t{64} << 10;

// The copies and the fold of an all-reduce of a tensor of ws blocks, on one
// host with private buffers (nothing mapped across processes), where each
// rank folds one block and every byte that crosses processes is copied once
// (into a staging segment by its owner, or out of the peer by
// process_vm_readv). Each rank
//   copies out  the ws - 1 blocks it does not fold (for the ranks that do),
//   folds       its block: reads the ws contributions to it, writes the result,
//   copies in   the ws - 1 reduced blocks it did not fold (from their folders).
// Here each rank does all three within its own memory (its staging stands
// for the peers': the same bytes, read and written as often), then the ranks
// meet in an MPI_Barrier, so that the slowest rank's time is the time until
// every rank has done its share on the cores they share. An all-reduce's
// time over this is what its exchange costs: the handshakes, the waits, and
// bytes coming from another core. It is not a strict lower bound: a transport
// may write its staging with non-temporal stores (no read for ownership),
// or fold straight out of peers' tensors it can map (scatterx's shareable
// memory). The fold adds 32-bit integers, the same traffic in any dtype
// (exact, and never slowed by a denormal).
Case make_all_reduce_copies(Env& env, int64_t size) {
  struct B {
    sx::Tensor pristine, buf, staging, ref;
  };
  auto b = std::make_shared<B>();
  const int64_t block_bytes =
      std::max<int64_t>(1, size / (g_ws * 4 * kWordsPerTile)) * 4 * kWordsPerTile;  // whole tiles
  const int64_t n = g_ws * block_bytes / env.esize;
  b->pristine = sx::Tensor::empty({n}, env.dtype);
  fill(b->pristine, 6000 + static_cast<uint64_t>(g_rank));
  b->buf = touched({n}, env.dtype);
  b->staging = touched({n}, env.dtype);  // its ws - 1 blocks other than this rank's are used
  b->ref = touched({n}, env.dtype);
  Case c;
  c.op = "all_reduce_copies";
  c.bytes = g_ws * block_bytes;
  c.count = n;
  c.bus_factor = 2.0 * (g_ws - 1) / g_ws;
  B* p = b.get();
  Env* e = &env;
  // In place, as the all_reduce case runs: buf starts as pristine (reset, untimed) and ends with this
  // rank's block the wrapping sum of its ws blocks; the copies in write back the bytes the copies out took.
  c.sx = [p, e, block_bytes] {
    auto* buf = static_cast<char*>(p->buf.data());
    auto* staging = static_cast<char*>(p->staging.data());
    for (int64_t o = 0; o < block_bytes; o += kChunkBytes) {
      const int64_t len = std::min(kChunkBytes, block_bytes - o);
      for (int q = 0; q < g_ws; ++q) {
        if (q != g_rank)
          std::memcpy(staging + q * block_bytes + o, buf + q * block_bytes + o, static_cast<size_t>(len));
      }
      for (int64_t t = o / 4; t < (o + len) / 4; t += kWordsPerTile) {
        uint32_t acc[kWordsPerTile];
        char* mine = buf + g_rank * block_bytes + t * 4;
        std::memcpy(acc, mine, sizeof acc);
        for (int q = 0; q < g_ws; ++q) {
          if (q == g_rank) continue;
          const auto* from = reinterpret_cast<const uint32_t*>(staging + q * block_bytes) + t;
          for (int64_t i = 0; i < kWordsPerTile; ++i) acc[i] += from[i];
        }
        std::memcpy(mine, acc, sizeof acc);
      }
      for (int q = 0; q < g_ws; ++q) {
        if (q != g_rank)
          std::memcpy(buf + q * block_bytes + o, staging + q * block_bytes + o, static_cast<size_t>(len));
      }
    }
    MPI_Barrier(e->native);
  };
  c.mpi = c.sx;
  c.reset = [p] { std::memcpy(p->buf.data(), p->pristine.data(), nbytes(p->buf)); };
  // Against a serial reference: pristine, with this rank's block the wrapping sum of the ws blocks.
  c.verify = [e, p, block_bytes, run = c.sx, reset = c.reset](Check& ck) {
    std::memcpy(p->ref.data(), p->pristine.data(), nbytes(p->ref));
    const auto* in = static_cast<const char*>(p->pristine.data());
    auto* mine = static_cast<char*>(p->ref.data()) + g_rank * block_bytes;
    for (int64_t w = 0; w < block_bytes / 4; ++w) {
      uint32_t sum = 0;
      for (int q = 0; q < g_ws; ++q) {
        uint32_t v = 0;
        std::memcpy(&v, in + q * block_bytes + w * 4, 4);
        sum += v;
      }
      std::memcpy(mine + w * 4, &sum, 4);
    }
    reset();
    checked_call(*e, ck, run);
    if (!ck.error) compare(p->buf, p->ref, true, ck);
  };
  c.keep = b;
  return c;
}

}  // namespace scatterx_bench_collectives
