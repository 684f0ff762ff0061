// scatterx_bench_collectives: scatterx's collectives (dist/dist.h) next to the
// native MPI calls, on the same buffers, in the same run, interleaved.
//
//   mpirun -n 2 scatterx_bench_collectives [--min-bytes 1K] [--max-bytes 64M]
//       [--factor 4] [--iters N] [--warmup N] [--dtype float32|bfloat16|float64]
//       [--ops reduce_scatter,all_gather,all_reduce,all_to_all_v,all_to_all_single]
//       [--markdown FILE] [--json FILE] [--strict] [--retries 2] [--noisy 0.10] [--timeout 60]
//
// Pairs (scatterx / native):
//   reduce_scatter     reduce_scatter_tensor(out [n], in [ws*n], Sum)
//                      / MPI_Reduce_scatter_block(MPI_SUM)
//   all_gather         all_gather_into_tensor(out [ws*n], in [n]) / MPI_Allgather
//   all_reduce         all_reduce(buf [n], Sum), in place / MPI_Allreduce(MPI_IN_PLACE)
//   all_to_all_v       all_to_all_v(in [rows, 16], send_splits): receive splits
//                      worked out by scatterx, output allocated by the call
//                      / MPI_Alltoallv with the counts known beforehand
//   all_to_all_single  all_to_all_single(out, in, recv_splits, send_splits)
//                      into a preallocated output / the same MPI_Alltoallv
//                      (no floor; it separates the transfer from all_to_all_v's
//                      split exchange and allocation)
//   broadcast          broadcast(buf [n], root 0) / MPI_Bcast (busbw = algbw)
//   copy               not a collective: every rank memcpy's `size` bytes (the
//                      all-gather's output) at once, both columns alike: the
//                      bytes an all-gather rank must write, at the copy
//                      bandwidth the ranks get together (the limit of a
//                      single-copy all-gather)
//   peer_copy          not a collective: every rank gathers the all-gather's
//                      blocks from its peers' memory, by process_vm_readv
//                      out of their private buffers / by memcpy out of an
//                      MPI shared-memory window (the two single copies one
//                      process can make of another's bytes; no handshake)
//   all_reduce_copies  not a collective: every rank copies out the ws - 1
//                      blocks it does not fold, folds its own block from ws
//                      contributions and copies in ws - 1 blocks, within its
//                      own memory, then an MPI_Barrier; both columns alike:
//                      an all-reduce of private buffers without the exchange
//                      (collectives/limits.cpp)
// Uneven splits: rank r sends u * ((r + j) % ws + 1) rows of 16 elements to
// rank j, so every rank sends and receives u * ws * (ws + 1) / 2 rows.
//
// Sizes follow nccl-tests: "size" is the all-gather's gathered output, the
// reduce-scatter's input (ws * n elements), the all-reduce's tensor and the
// all-to-all's per-rank send buffer, in bytes; each size of the series (min,
// min * factor, ... max) is rounded down to what the shapes allow (a multiple
// of ws elements; whole rows and split units for the all-to-alls), and the
// table prints the bytes actually moved. "count" is the element count of the
// call's count argument as nccl-tests prints it: the per-rank block for
// reduce_scatter and all_gather, the tensor for all_reduce, the per-rank send
// buffer for the all-to-alls (its splits are uneven). algbw = size / time;
// busbw = algbw * (ws - 1) / ws (reduce_scatter, all_gather, all-to-alls) or
// algbw * 2 (ws - 1) / ws (all_reduce). GB = 1e9 bytes.
//
// Method: per op and size, each implementation runs --warmup times, then they
// alternate (scatterx, MPI, scatterx, MPI, ...) for --iters timed calls each,
// with an MPI_Barrier before every timed call. A call's time is the slowest
// rank's (MPI_Reduce MAX of each rank's MPI_Wtime difference); the table gives
// the median (p50) and the 99th percentile over the timed calls, and the
// bandwidths and the ratio (scatterx busbw / MPI busbw) from the medians.
// --iters 0 (the default) takes 20 * sqrt(64 MiB / size) calls, clamped to
// [20, 200]. The all-reduce restores its buffer from a pristine copy before
// every call (outside the timed region, the same for both). all_to_all_v's
// result is released outside the timed region. The other ops write into
// buffers allocated (and touched) once per op and size.
//
// Other CPU: the share of the machine's CPU time (from /proc/stat, including
// time stolen by the hypervisor) that went to processes other than the ranks
// while an op and size ran (only meaningful when all ranks share the machine;
// "-" when the block was too short to tell). A block above --noisy is run again
// (--retries times at most, after waiting up to 30 s for a quiet second) and
// the quietest attempt is kept.
//
// Checks: once per op and size, before timing, both implementations run on the
// same inputs into outputs filled with NaN, and their results are compared:
// bit-identical for the all-gather and the all-to-alls (and all_to_all_v's
// receive splits must be the expected ones); sums within a tolerance (float32
// rtol = atol = 1e-5, float64 1e-12, bfloat16 1e-2), since the ranks' values
// may be added in another order. The cross-rank metadata checks of dist.h are
// switched on for this call (so that an argument error raises on every rank
// instead of leaving peers waiting), and back to the communicator's setting
// (SCATTERX_DIST_CHECKS) for the timed calls. bfloat16 reductions on the MPI
// side use a user-defined MPI_Op (convert to float, add, round to nearest even),
// as MPI has no bfloat16 type.
//
// Floors: scatterx's busbw at p50 against MPI's, per op, for some world sizes
//   and sizes: the table kFloors in floors.cpp (each row's op, ranks, sizes,
//   ratio and why). The verdict is printed at the end; --strict exits 1 when
//   one is missed. A failed check (or a scatterx error) always exits 1.
//
// Files (bench/collectives/): options (the command line), cases (the pairs,
// their buffers and checks) and limits (the copy limits) over data (inputs), mpi_types and check (the
// comparison); cpu_monitor (other CPU); floors; report (the table and the
// summary); this file runs them: setup, per op and size check and time, report.

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "cases.h"
#include "check.h"
#include "cpu_monitor.h"
#include "dist/dist.h"
#include "floors.h"
#include "mpi_types.h"
#include "options.h"
#include "report.h"
#include "world.h"

namespace scatterx_bench_collectives {
namespace {

// ---- setup ----------------------------------------------------------------------------------------

// scatterx's communicator (with --timeout), a duplicate of MPI_COMM_WORLD for the native calls, and
// the dtype's MPI types. release() frees what this creates.
Env make_env(const Options& opt) {
  Env env(scatterx::dist::Communicator::world());
  env.comm.set_timeout(std::chrono::duration<double>(opt.timeout_s));
  MPI_Comm_dup(MPI_COMM_WORLD, &env.native);
  env.dtype = opt.dtype;
  env.esize = scatterx::element_size(opt.dtype);
  env.types = mpi_types(opt.dtype);
  return env;
}

void release(Env& env) {
  if (env.types.user_op) MPI_Op_free(&env.types.sum);
  MPI_Comm_free(&env.native);
}

// min, min * factor, ... up to max.
std::vector<int64_t> size_series(const Options& opt) {
  std::vector<int64_t> sizes;
  for (int64_t s = opt.min_bytes; s <= opt.max_bytes; s *= opt.factor) {
    sizes.push_back(s);
    if (s > opt.max_bytes / opt.factor) break;
  }
  return sizes;
}

// --iters, or 20 * sqrt(64 MiB / size) clamped to [20, 200].
int timed_calls(const Options& opt, int64_t size) {
  if (opt.iters) return opt.iters;
  return static_cast<int>(std::clamp(20.0 * std::sqrt(64.0 * kMiB / static_cast<double>(size)), 20.0, 200.0));
}

// ---- one op and size: check, then time ------------------------------------------------------------

Result new_result(const Case& c, const std::string& op, int64_t size) {
  Result res;
  res.op = op;
  res.nominal = size;
  res.bytes = c.bytes;
  res.count = c.count;
  res.bus_factor = c.bus_factor;
  res.floor = floor_for(op, g_ws, size);
  return res;
}

// Runs the case's result check on every rank and writes the verdict into res.check. Returns false when
// scatterx raised or returned a wrong shape: the case is then not timed.
bool check_case(Case& c, Result& res, const Report& report) {
  Check ck;
  c.verify(ck);
  int64_t mism = 0;
  int bitwise = 0, err = 0;
  double max_abs = 0;
  MPI_Allreduce(&ck.mismatches, &mism, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&ck.bitwise, &bitwise, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&ck.error, &err, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&ck.max_abs, &max_abs, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  const std::string what = res.op + " " + human(res.nominal);
  if (ck.error) {
    std::fprintf(stderr, "FAIL %s rank %d: %s\n", what.c_str(), g_rank, ck.message.c_str());
    std::fflush(stderr);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (err) {
    res.check = "FAIL (error)";
    res.failed = true;
    report.note("FAIL " + what + ": scatterx raised or returned a wrong shape (see above); not timed");
    return false;
  }
  if (mism) {
    res.failed = true;
    res.check = "FAIL (" + std::to_string(mism) + " elements)";
    std::ostringstream m;
    m << "FAIL " << what << ": " << mism << " elements differ from MPI's result"
      << (c.exact ? " (bit-identical required)" : " beyond tolerance") << ", max abs difference " << max_abs;
    report.note(m.str());
  } else if (bitwise) {
    res.check = "exact";
  } else {
    res.check = "max diff " + fmt("%.1g", max_abs);
  }
  return true;
}

// --warmup untimed calls of each, then the timed calls (as many as t_sx holds), alternating scatterx and
// MPI, each after a barrier; t_sx and t_mpi get this rank's seconds per call.
void run_interleaved(Case& c, int warmup, std::vector<double>& t_sx, std::vector<double>& t_mpi) {
  for (int w = 0; w < warmup; ++w) {
    if (c.reset) c.reset();
    c.sx();
    if (c.reset) c.reset();
    c.mpi();
  }
  for (size_t i = 0; i < t_sx.size(); ++i) {
    if (c.reset) c.reset();
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    c.sx();
    t_sx[i] = MPI_Wtime() - t0;
    if (c.reset) c.reset();
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    c.mpi();
    t_mpi[i] = MPI_Wtime() - t0;
  }
  if (c.reset) c.reset();
}

// Times the case into res (on rank 0): run again, at most --retries times, while other processes used
// more than --noisy of the CPUs, keeping the quietest attempt.
void time_case(Case& c, const Options& opt, Result& res, const Report& report) {
  const auto iters = static_cast<size_t>(timed_calls(opt, res.nominal));
  std::vector<double> t_sx(iters), t_mpi(iters);
  std::vector<double> m_sx(iters), m_mpi(iters);
  for (int attempt = 0;; ++attempt) {
    CpuMonitor mon;
    mon.start();
    run_interleaved(c, opt.warmup, t_sx, t_mpi);
    // A call's time is the slowest rank's.
    MPI_Reduce(t_sx.data(), m_sx.data(), static_cast<int>(iters), MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(t_mpi.data(), m_mpi.data(), static_cast<int>(iters), MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    const double other = mon.other_fraction();
    int again = 0;
    if (g_rank == 0) {
      if (attempt == 0 || other < res.other || std::isnan(res.other)) {
        for (auto& t : m_sx) t *= 1e6;
        for (auto& t : m_mpi) t *= 1e6;
        res.sx = {quantile(m_sx, 0.5), quantile(m_sx, 0.99)};
        res.mpi = {quantile(m_mpi, 0.5), quantile(m_mpi, 0.99)};
        res.other = other;
      }
      again = other > opt.noisy && attempt < opt.retries;
    }
    MPI_Bcast(&again, 1, MPI_INT, 0, MPI_COMM_WORLD);
    res.attempts = attempt + 1;
    if (!again) break;
    const double waited = wait_quiet(opt.noisy, 30);
    report.note("  (" + res.op + " " + human(res.nominal) + ": other processes used " + pct(other) +
                " of the CPUs; waited " + fmt("%.0f", waited) + " s, running it again)");
  }
}

void print_progress(const Report& report, const Result& res) {
  if (g_rank != 0) return;
  char buf[256];
  std::snprintf(buf, sizeof buf, "  %-17s %8s  scatterx p50 %10.1f us  MPI p50 %10.1f us  busbw x%.2f  [%s]%s",
                res.op.c_str(), human(res.nominal).c_str(), res.sx.p50_us, res.mpi.p50_us, res.ratio(),
                res.check.c_str(), std::isnan(res.other) ? "" : ("  other CPU " + pct(res.other)).c_str());
  report.note(buf);
}

// ---- the benchmark --------------------------------------------------------------------------------

// Every op over every size, in that order; a case's buffers are freed before the next is built.
std::vector<Result> measure_all(Env& env, const Options& opt, const Report& report) {
  const std::vector<int64_t> sizes = size_series(opt);
  std::vector<Result> results;
  for (const std::string& op : opt.ops) {
    for (const int64_t size : sizes) {
      Case c = make_case(env, op, size);
      Result res = new_result(c, op, size);
      if (check_case(c, res, report)) {
        time_case(c, opt, res, report);
        print_progress(report, res);
      }
      results.push_back(res);
    }
  }
  return results;
}

int run(int argc, char** argv) {
  const Options opt = parse_options(argc, argv);
  Env env = make_env(opt);
  Report report;
  print_context(report, opt, /*timed_checks=*/env.comm.checks(), env.types.user_op);

  CpuMonitor whole;
  whole.start();
  const std::vector<Result> results = measure_all(env, opt, report);
  const double other_all = whole.other_fraction();
  const auto failures =
      static_cast<int>(std::count_if(results.begin(), results.end(), [](const Result& r) { return r.failed; }));

  int status = 0;
  if (g_rank == 0) {
    const FloorVerdicts floors = print_table(report, results);
    print_summary(report, opt, floors, other_all, failures);
    if (!opt.markdown.empty()) report.write_markdown(opt.markdown);
    if (!opt.json.empty()) write_json(opt.json, opt, results);
    status = failures ? 1 : (opt.strict && !floors.missed.empty()) ? 1 : 0;
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  release(env);
  return status;
}

}  // namespace
}  // namespace scatterx_bench_collectives

int main(int argc, char** argv) {
  namespace bench = scatterx_bench_collectives;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &bench::g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &bench::g_ws);
  int status = 0;
  try {
    status = bench::run(argc, argv);  // the scatterx communicator is freed when run() returns
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", bench::g_rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
