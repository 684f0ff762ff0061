// scatterx_bench_collectives: scatterx's collectives (dist/dist.h) next to the
// native MPI calls, on the same buffers, in the same run, interleaved.
//
//   mpirun -n 2 scatterx_bench_collectives [--min-bytes 1K] [--max-bytes 64M]
//       [--factor 4] [--iters N] [--warmup N] [--dtype float32|bfloat16|float64]
//       [--ops reduce_scatter,all_gather,all_reduce,all_to_all_v,all_to_all_single]
//       [--markdown FILE] [--strict] [--retries 2] [--noisy 0.10] [--timeout 60]
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
// Floors (2 ranks; sizes 16 MiB to 64 MiB; busbw at p50):
//   reduce_scatter >= 3.0x MPI_Reduce_scatter_block, all_gather >= 0.9x
//   MPI_Allgather, all_to_all_v >= 0.9x MPI_Alltoallv, all_reduce >= 1.0x
//   MPI_Allreduce. The verdict is printed at the end; --strict exits 1 when
//   one is missed. A failed check (or a scatterx error) always exits 1.

#include <mpi.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "dist/dist.h"
#include "ops/numeric.h"
#include "ops/tensor.h"
#include "ops/version.h"

namespace {

namespace sx = scatterx;
namespace sxd = scatterx::dist;

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * 1024;
constexpr int64_t kRowElems = 16;  // elements per row of the all-to-all inputs

int g_rank = 0;
int g_ws = 1;

// ---- options ------------------------------------------------------------------------------------

struct Options {
  int64_t min_bytes = kKiB;
  int64_t max_bytes = 64 * kMiB;
  int64_t factor = 4;
  int iters = 0;  // 0: by size
  int warmup = 5;
  sx::DType dtype = sx::DType::Float32;
  std::vector<std::string> ops{"reduce_scatter", "all_gather", "all_reduce", "all_to_all_v", "all_to_all_single"};
  std::string markdown;
  bool strict = false;
  int retries = 2;
  double noisy = 0.10;
  double timeout_s = 60;
};

const char* const kUsage =
    "usage: mpirun -n N scatterx_bench_collectives [options]\n"
    "  --min-bytes B      smallest size (default 1K; suffixes K, M, G = KiB, MiB, GiB)\n"
    "  --max-bytes B      largest size (default 64M)\n"
    "  --factor F         size step (default 4)\n"
    "  --iters N          timed calls per implementation, op and size (default 0: 20 * sqrt(64 MiB / size),\n"
    "                     clamped to [20, 200])\n"
    "  --warmup N         untimed calls first (default 5)\n"
    "  --dtype T          float32 (default), bfloat16 or float64\n"
    "  --ops LIST         comma-separated: reduce_scatter, all_gather, all_reduce, all_to_all_v,\n"
    "                     all_to_all_single (default: all)\n"
    "  --markdown FILE    also write the report as markdown to FILE\n"
    "  --strict           exit 1 when a floor is missed (2 ranks, 16 to 64 MiB)\n"
    "  --retries N        reruns of an op and size during which other processes used more than\n"
    "                     --noisy of the CPUs (default 2)\n"
    "  --noisy F          that threshold (default 0.10)\n"
    "  --timeout S        scatterx communicator timeout in seconds (default 60)\n";

[[noreturn]] void usage_error(const std::string& message) {
  if (g_rank == 0) std::fprintf(stderr, "error: %s\n%s", message.c_str(), kUsage);
  MPI_Finalize();
  std::exit(2);
}

int64_t parse_bytes(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  std::string suffix(end);
  for (auto& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double scale = 1;
  if (suffix.empty() || suffix == "B") {
    scale = 1;
  } else if (suffix == "K" || suffix == "KB" || suffix == "KIB") {
    scale = kKiB;
  } else if (suffix == "M" || suffix == "MB" || suffix == "MIB") {
    scale = kMiB;
  } else if (suffix == "G" || suffix == "GB" || suffix == "GIB") {
    scale = 1024.0 * kMiB;
  } else {
    usage_error("cannot read the size '" + text + "'");
  }
  if (end == text.c_str() || !(value > 0)) usage_error("cannot read the size '" + text + "'");
  return static_cast<int64_t>(value * scale);
}

std::string canonical_op(const std::string& name) {
  if (name == "reduce_scatter" || name == "reduce_scatter_tensor") return "reduce_scatter";
  if (name == "all_gather" || name == "all_gather_into_tensor") return "all_gather";
  if (name == "all_reduce") return "all_reduce";
  if (name == "all_to_all_v" || name == "alltoallv") return "all_to_all_v";
  if (name == "all_to_all_single") return "all_to_all_single";
  usage_error("unknown op '" + name + "'");
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    const auto eq = arg.find('=');
    bool has_value = false;
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    auto next = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= argc) usage_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      if (g_rank == 0) std::fputs(kUsage, stdout);
      MPI_Finalize();
      std::exit(0);
    } else if (arg == "--min-bytes") {
      o.min_bytes = parse_bytes(next());
    } else if (arg == "--max-bytes") {
      o.max_bytes = parse_bytes(next());
    } else if (arg == "--factor") {
      o.factor = std::atoll(next().c_str());
    } else if (arg == "--iters") {
      o.iters = std::atoi(next().c_str());
    } else if (arg == "--warmup") {
      o.warmup = std::atoi(next().c_str());
    } else if (arg == "--dtype") {
      const std::string t = next();
      if (t == "float32" || t == "float") {
        o.dtype = sx::DType::Float32;
      } else if (t == "bfloat16") {
        o.dtype = sx::DType::BFloat16;
      } else if (t == "float64" || t == "double") {
        o.dtype = sx::DType::Float64;
      } else {
        usage_error("--dtype must be float32, bfloat16 or float64");
      }
    } else if (arg == "--ops") {
      o.ops.clear();
      std::stringstream list(next());
      std::string item;
      while (std::getline(list, item, ',')) {
        if (item.empty()) continue;
        const std::string op = canonical_op(item);
        if (std::find(o.ops.begin(), o.ops.end(), op) == o.ops.end()) o.ops.push_back(op);
      }
      if (o.ops.empty()) usage_error("--ops names no op");
    } else if (arg == "--markdown") {
      o.markdown = next();
    } else if (arg == "--strict") {
      o.strict = true;
    } else if (arg == "--retries") {
      o.retries = std::atoi(next().c_str());
    } else if (arg == "--noisy") {
      o.noisy = std::atof(next().c_str());
    } else if (arg == "--timeout") {
      o.timeout_s = std::atof(next().c_str());
    } else {
      usage_error("unknown argument '" + arg + "'");
    }
  }
  if (o.min_bytes < 1 || o.max_bytes < o.min_bytes) usage_error("need 0 < --min-bytes <= --max-bytes");
  if (o.factor < 2) usage_error("--factor must be at least 2");
  if (o.iters < 0 || o.warmup < 0 || o.retries < 0) usage_error("--iters, --warmup, --retries must be >= 0");
  if (!(o.timeout_s > 0)) usage_error("--timeout must be positive");
  return o;
}

// ---- data -----------------------------------------------------------------------------------------

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Value i of stream `seed`: uniform in [-1, 1), exactly representable in every dtype used here after
// rounding (the rounding is the dtype's).
float value_at(uint64_t seed, int64_t i) {
  const uint64_t bits = splitmix64(seed * 0x100000001B3ull + static_cast<uint64_t>(i));
  return static_cast<float>(static_cast<double>(bits >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

void fill(const sx::TensorView& t, uint64_t seed) {
  const int64_t n = t.numel();
  switch (t.dtype()) {
    case sx::DType::Float32: {
      auto* p = static_cast<float*>(t.data());
      for (int64_t i = 0; i < n; ++i) p[i] = value_at(seed, i);
      break;
    }
    case sx::DType::Float64: {
      auto* p = static_cast<double*>(t.data());
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<double>(value_at(seed, i)) + 0x1.0p-40 * value_at(~seed, i);
      break;
    }
    case sx::DType::BFloat16: {
      auto* p = static_cast<sx::BFloat16*>(t.data());
      for (int64_t i = 0; i < n; ++i) p[i] = sx::BFloat16(value_at(seed, i));
      break;
    }
    default:
      break;
  }
}

// All bytes 0xff: a NaN in float32, float64 and bfloat16, so an element a collective leaves
// unwritten shows.
void poison(const sx::TensorView& t) { std::memset(t.data(), 0xff, static_cast<size_t>(t.numel() * t.element_size())); }

size_t nbytes(const sx::TensorView& t) { return static_cast<size_t>(t.numel() * t.element_size()); }

sx::Tensor touched(const sx::Shape& shape, sx::DType dtype) {
  sx::Tensor t = sx::Tensor::empty(shape, dtype);
  std::memset(t.data(), 0, nbytes(t));
  return t;
}

// ---- MPI types and the bfloat16 sum ---------------------------------------------------------------

void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float s = sx::detail::bfloat16_bits_to_float(a[i]) + sx::detail::bfloat16_bits_to_float(b[i]);
    b[i] = sx::detail::float_to_bfloat16_bits(s);
  }
}

struct MpiTypes {
  MPI_Datatype type = MPI_FLOAT;
  MPI_Op sum = MPI_SUM;
  bool user_op = false;
};

MpiTypes mpi_types(sx::DType dtype) {
  MpiTypes t;
  switch (dtype) {
    case sx::DType::Float32:
      t.type = MPI_FLOAT;
      break;
    case sx::DType::Float64:
      t.type = MPI_DOUBLE;
      break;
    case sx::DType::BFloat16:
      t.type = MPI_UINT16_T;
      MPI_Op_create(&bf16_sum, /*commute=*/1, &t.sum);
      t.user_op = true;
      break;
    default:
      break;
  }
  return t;
}

int as_int(int64_t v, const char* what) {
  if (v > INT32_MAX) {
    std::fprintf(stderr, "rank %d: %s = %lld does not fit MPI's int counts\n", g_rank, what, static_cast<long long>(v));
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return static_cast<int>(v);
}

// ---- checks ---------------------------------------------------------------------------------------

struct Check {
  int64_t mismatches = 0;  // elements outside tolerance (or not bit-identical, when exact is required)
  int bitwise = 1;         // all bit-identical
  double max_abs = 0;      // largest |difference| (inf for NaN against a number)
  int error = 0;           // scatterx raised, or returned the wrong shape / splits
  std::string message;     // this rank's error text
};

template <typename T>
double as_double(T v) {
  return static_cast<double>(static_cast<float>(v));
}
template <>
double as_double<double>(double v) {
  return v;
}

template <typename T>
void compare_typed(const void* got_p, const void* want_p, int64_t n, double rtol, double atol, Check& c) {
  const auto* got = static_cast<const T*>(got_p);
  const auto* want = static_cast<const T*>(want_p);
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) == 0) continue;
    c.bitwise = 0;
    const double a = as_double(got[i]);
    const double b = as_double(want[i]);
    double diff = std::fabs(a - b);
    if (std::isnan(diff)) diff = INFINITY;
    c.max_abs = std::max(c.max_abs, diff);
    if (!(diff <= atol + rtol * std::fabs(b))) ++c.mismatches;
  }
}

// got (scatterx) against want (MPI); exact: any bit difference is a mismatch.
void compare(const sx::TensorView& got, const sx::TensorView& want, bool exact, Check& c) {
  if (got.numel() != want.numel() || got.dtype() != want.dtype()) {
    c.error = 1;
    c.message = "scatterx's result is " + got.str() + ", MPI's " + want.str();
    return;
  }
  double rtol = 0, atol = 0;
  if (!exact) {
    rtol = atol = want.dtype() == sx::DType::BFloat16 ? 1e-2 : want.dtype() == sx::DType::Float64 ? 1e-12 : 1e-5;
  }
  switch (want.dtype()) {
    case sx::DType::Float32:
      compare_typed<float>(got.data(), want.data(), want.numel(), rtol, atol, c);
      break;
    case sx::DType::Float64:
      compare_typed<double>(got.data(), want.data(), want.numel(), rtol, atol, c);
      break;
    case sx::DType::BFloat16:
      compare_typed<sx::BFloat16>(got.data(), want.data(), want.numel(), rtol, atol, c);
      break;
    default:
      break;
  }
}

// ---- other processes' CPU time (/proc/stat) -------------------------------------------------------

double proc_busy_seconds() {
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return NAN;
  unsigned long long v[10] = {};
  const int got = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                              &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
  std::fclose(f);
  if (got < 8) return NAN;
  // user nice system idle iowait irq softirq steal: everything but idle and iowait
  unsigned long long busy = 0;
  for (int i = 0; i < 8; ++i) busy += v[i];
  busy -= v[3] + v[4];
  return static_cast<double>(busy) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Collective: every rank calls start() and other_fraction(); the fraction is valid on rank 0.
class CpuMonitor {
 public:
  void start() {
    wall0_ = MPI_Wtime();
    own0_ = process_cpu_seconds();
    busy0_ = g_rank == 0 ? proc_busy_seconds() : 0;
  }
  double other_fraction() const {
    const double own = process_cpu_seconds() - own0_;
    double own_all = 0;
    MPI_Reduce(&own, &own_all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (g_rank != 0) return NAN;
    const double busy = proc_busy_seconds();
    const double wall = MPI_Wtime() - wall0_;
    const double ncpu = static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN));
    if (std::isnan(busy) || std::isnan(busy0_)) return NAN;
    if (wall * ncpu * static_cast<double>(sysconf(_SC_CLK_TCK)) < 50) return NAN;  // too few clock ticks to tell
    return std::max(0.0, (busy - busy0_) - own_all) / (wall * ncpu);
  }

 private:
  double wall0_ = 0, own0_ = 0, busy0_ = 0;
};

// Collective: sleeps in 1 s steps (all ranks idle) until other processes use less than `noisy` of the
// CPUs, at most limit_s; returns the wait (on every rank).
double wait_quiet(double noisy, double limit_s) {
  const double t0 = MPI_Wtime();
  CpuMonitor m;
  for (;;) {
    MPI_Barrier(MPI_COMM_WORLD);
    m.start();
    sleep(1);
    const double other = m.other_fraction();
    int done = g_rank == 0 ? (!(other > noisy) || MPI_Wtime() - t0 >= limit_s) : 0;
    MPI_Bcast(&done, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (done) break;
  }
  return MPI_Wtime() - t0;
}

// ---- cases ----------------------------------------------------------------------------------------

struct Case {
  std::string op;
  int64_t bytes = 0;  // nccl-tests' size
  int64_t count = 0;
  double bus_factor = 1;
  bool exact = true;
  std::function<void()> sx;     // timed
  std::function<void()> mpi;    // timed
  std::function<void()> reset;  // before every call, untimed (may be empty)
  std::function<void(Check&)> verify;
  std::shared_ptr<void> keep;  // the buffers
};

struct Env {
  explicit Env(sxd::Communicator c) : comm(std::move(c)) {}
  sxd::Communicator comm;
  MPI_Comm native = MPI_COMM_NULL;
  MpiTypes types;
  sx::DType dtype = sx::DType::Float32;
  int64_t esize = 4;
};

// Runs fn with the communicator's cross-rank checks on; records a scatterx error instead of throwing.
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

Case make_all_to_all(Env& env, int64_t size, bool v) {
  struct B {
    sx::Tensor in, out, ref;
    Splits s;
    sx::Tensor last;  // all_to_all_v's latest result
    std::vector<int64_t> last_splits;
  };
  auto b = std::make_shared<B>();
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
  B* p = b.get();
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
    c.verify = [p, e, sxf = c.sx, mpif = c.mpi](Check& ck) {
      p->last = sx::Tensor();
      checked_call(*e, ck, sxf);
      poison(p->out);
      mpif();
      if (ck.error) return;
      if (p->last_splits != p->s.recv_rows) {
        std::ostringstream m;
        m << "all_to_all_v returned recv_splits [";
        for (size_t i = 0; i < p->last_splits.size(); ++i) m << (i ? ", " : "") << p->last_splits[i];
        m << "], expected [";
        for (size_t i = 0; i < p->s.recv_rows.size(); ++i) m << (i ? ", " : "") << p->s.recv_rows[i];
        m << "]";
        ck.error = 1;
        ck.message = m.str();
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
  } else {
    c.sx = [p, e] { sxd::all_to_all_single(p->out, p->in, p->s.recv_rows, p->s.send_rows, e->comm); };
    c.verify = compare_runs(e, c, &p->out, &p->ref, true, [p] { poison(p->out); });
  }
  c.keep = b;
  return c;
}

Case make_case(Env& env, const std::string& op, int64_t size) {
  if (op == "reduce_scatter") return make_reduce_scatter(env, size);
  if (op == "all_gather") return make_all_gather(env, size);
  if (op == "all_reduce") return make_all_reduce(env, size);
  if (op == "all_to_all_v") return make_all_to_all(env, size, true);
  return make_all_to_all(env, size, false);
}

// ---- statistics and report ------------------------------------------------------------------------

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

struct Timing {
  double p50_us = NAN, p99_us = NAN;
};

struct Result {
  std::string op;
  int64_t nominal = 0, bytes = 0, count = 0;
  double bus_factor = 1;
  Timing sx, mpi;
  std::string check;
  bool failed = false;
  double other = NAN;
  int attempts = 1;
  double floor = 0;  // 0: none at this size / world size

  double algbw(const Timing& t) const { return static_cast<double>(bytes) / (t.p50_us * 1e-6) / 1e9; }
  double busbw(const Timing& t) const { return algbw(t) * bus_factor; }
  double ratio() const { return busbw(sx) / busbw(mpi); }
};

double floor_for(const std::string& op, int64_t nominal) {
  if (g_ws != 2 || nominal < 16 * kMiB || nominal > 64 * kMiB) return 0;
  if (op == "reduce_scatter") return 3.0;
  if (op == "all_gather" || op == "all_to_all_v") return 0.9;
  if (op == "all_reduce") return 1.0;
  return 0;
}

const char* native_name(const std::string& op) {
  if (op == "reduce_scatter") return "MPI_Reduce_scatter_block";
  if (op == "all_gather") return "MPI_Allgather";
  if (op == "all_reduce") return "MPI_Allreduce";
  return "MPI_Alltoallv";
}

const char* sx_name(const std::string& op) {
  if (op == "reduce_scatter") return "reduce_scatter_tensor";
  if (op == "all_gather") return "all_gather_into_tensor";
  return op.c_str();
}

std::string human(int64_t bytes) {
  char buf[32];
  if (bytes >= kMiB && bytes % kMiB == 0) {
    std::snprintf(buf, sizeof buf, "%lld MiB", static_cast<long long>(bytes / kMiB));
  } else if (bytes >= kKiB && bytes % kKiB == 0) {
    std::snprintf(buf, sizeof buf, "%lld KiB", static_cast<long long>(bytes / kKiB));
  } else {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  }
  return buf;
}

std::string fmt(const char* f, double v) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string pct(double v) { return std::isnan(v) ? "-" : fmt("%.0f%%", v * 100); }

std::string cpu_model() {
  std::FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (!f) return "?";
  char line[512];
  std::string model = "?";
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "model name", 10) == 0) {
      const char* colon = std::strchr(line, ':');
      if (colon) {
        model = colon + 1;
        while (!model.empty() && (model.front() == ' ' || model.front() == '\t')) model.erase(0, 1);
        while (!model.empty() && (model.back() == '\n' || model.back() == ' ')) model.pop_back();
      }
      break;
    }
  }
  std::fclose(f);
  return model;
}

// ---- the benchmark --------------------------------------------------------------------------------

int run(int argc, char** argv) {
  const Options opt = parse_options(argc, argv);
  Env env(sxd::Communicator::world());
  env.comm.set_timeout(std::chrono::duration<double>(opt.timeout_s));
  MPI_Comm_dup(MPI_COMM_WORLD, &env.native);
  env.dtype = opt.dtype;
  env.esize = sx::element_size(opt.dtype);
  env.types = mpi_types(opt.dtype);
  const bool timed_checks = env.comm.checks();

  std::vector<std::string> lines;  // the report, for --markdown
  auto emit = [&](const std::string& s) {
    if (g_rank != 0) return;
    std::printf("%s\n", s.c_str());
    std::fflush(stdout);
    lines.push_back(s);
  };
  auto note = [&](const std::string& s) {  // progress and failures, stderr only
    if (g_rank != 0) return;
    std::fprintf(stderr, "%s\n", s.c_str());
    std::fflush(stderr);
  };

  // Context.
  char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int lib_len = 0;
  MPI_Get_library_version(lib, &lib_len);
  std::string libs(lib, static_cast<size_t>(lib_len));
  if (const auto nl = libs.find_first_of("\n,"); nl != std::string::npos) libs.resize(nl);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::vector<char> hosts(static_cast<size_t>(256 * g_ws));
  MPI_Gather(host, 256, MPI_CHAR, hosts.data(), 256, MPI_CHAR, 0, MPI_COMM_WORLD);
  int nhosts = 0;
  if (g_rank == 0) {
    std::vector<std::string> distinct;
    for (int r = 0; r < g_ws; ++r) {
      std::string h(&hosts[static_cast<size_t>(256 * r)]);
      if (std::find(distinct.begin(), distinct.end(), h) == distinct.end()) distinct.push_back(h);
    }
    nhosts = static_cast<int>(distinct.size());
  }
  const char* omp = std::getenv("OMP_NUM_THREADS");
  emit(std::string("scatterx ") + SCATTERX_VERSION + ", " + libs + "; " + std::to_string(g_ws) + " ranks on " +
       std::to_string(nhosts) + " host(s); CPU: " + cpu_model() + ", " + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) +
       " logical CPUs; OMP_NUM_THREADS=" + (omp ? omp : "(unset)"));
  {
    std::ostringstream s;
    s << "dtype " << sx::dtype_name(opt.dtype) << "; sizes " << human(opt.min_bytes) << " to " << human(opt.max_bytes)
      << " (x" << opt.factor << "); "
      << (opt.iters ? std::to_string(opt.iters) + " timed calls"
                    : std::string("20 * sqrt(64 MiB / size) timed calls "
                                  "(20 to 200)"))
      << " per implementation after " << opt.warmup << " warm-up calls, interleaved, barrier before each; time = "
      << "slowest rank; p50 / p99 over calls; scatterx cross-rank checks during timing: "
      << (timed_checks ? "on" : "off") << (env.types.user_op ? "; MPI bfloat16 sums use a user-defined MPI_Op" : "");
    emit(s.str());
  }
  emit("");

  std::vector<int64_t> sizes;
  for (int64_t s = opt.min_bytes; s <= opt.max_bytes; s *= opt.factor) {
    sizes.push_back(s);
    if (s > opt.max_bytes / opt.factor) break;
  }

  std::vector<Result> results;
  int failures = 0;
  CpuMonitor whole;
  whole.start();

  for (const std::string& op : opt.ops) {
    for (const int64_t size : sizes) {
      Case c = make_case(env, op, size);
      Result res;
      res.op = op;
      res.nominal = size;
      res.bytes = c.bytes;
      res.count = c.count;
      res.bus_factor = c.bus_factor;
      res.floor = floor_for(op, size);

      // Check.
      Check ck;
      c.verify(ck);
      int64_t mism = 0;
      int bitwise = 0, err = 0;
      double max_abs = 0;
      MPI_Allreduce(&ck.mismatches, &mism, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
      MPI_Allreduce(&ck.bitwise, &bitwise, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
      MPI_Allreduce(&ck.error, &err, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      MPI_Allreduce(&ck.max_abs, &max_abs, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (ck.error) {
        std::fprintf(stderr, "FAIL %s %s rank %d: %s\n", op.c_str(), human(size).c_str(), g_rank, ck.message.c_str());
        std::fflush(stderr);
      }
      MPI_Barrier(MPI_COMM_WORLD);
      if (err) {
        res.check = "FAIL (error)";
        res.failed = true;
        ++failures;
        results.push_back(res);
        note("FAIL " + op + " " + human(size) + ": scatterx raised or returned a wrong shape (see above); not timed");
        continue;
      }
      if (mism) {
        res.failed = true;
        ++failures;
        res.check = "FAIL (" + std::to_string(mism) + " elements)";
        std::ostringstream m;
        m << "FAIL " << op << " " << human(size) << ": " << mism << " elements differ from MPI's result"
          << (c.exact ? " (bit-identical required)" : " beyond tolerance") << ", max abs difference " << max_abs;
        note(m.str());
      } else if (bitwise) {
        res.check = "exact";
      } else {
        res.check = "max diff " + fmt("%.1g", max_abs);
      }

      // Time, interleaved; rerun when other processes were busy.
      const int iters =
          opt.iters
              ? opt.iters
              : static_cast<int>(std::clamp(20.0 * std::sqrt(64.0 * kMiB / static_cast<double>(size)), 20.0, 200.0));
      std::vector<double> t_sx(static_cast<size_t>(iters)), t_mpi(static_cast<size_t>(iters));
      std::vector<double> m_sx(static_cast<size_t>(iters)), m_mpi(static_cast<size_t>(iters));
      for (int attempt = 0;; ++attempt) {
        CpuMonitor mon;
        mon.start();
        for (int w = 0; w < opt.warmup; ++w) {
          if (c.reset) c.reset();
          c.sx();
          if (c.reset) c.reset();
          c.mpi();
        }
        for (int i = 0; i < iters; ++i) {
          if (c.reset) c.reset();
          MPI_Barrier(MPI_COMM_WORLD);
          double t0 = MPI_Wtime();
          c.sx();
          t_sx[static_cast<size_t>(i)] = MPI_Wtime() - t0;
          if (c.reset) c.reset();
          MPI_Barrier(MPI_COMM_WORLD);
          t0 = MPI_Wtime();
          c.mpi();
          t_mpi[static_cast<size_t>(i)] = MPI_Wtime() - t0;
        }
        if (c.reset) c.reset();
        MPI_Reduce(t_sx.data(), m_sx.data(), iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(t_mpi.data(), m_mpi.data(), iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
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
        note("  (" + op + " " + human(size) + ": other processes used " + pct(other) + " of the CPUs; waited " +
             fmt("%.0f", waited) + " s, running it again)");
      }
      if (g_rank == 0) {
        char buf[256];
        std::snprintf(buf, sizeof buf, "  %-17s %8s  scatterx p50 %10.1f us  MPI p50 %10.1f us  busbw x%.2f  [%s]%s",
                      op.c_str(), human(size).c_str(), res.sx.p50_us, res.mpi.p50_us, res.ratio(), res.check.c_str(),
                      std::isnan(res.other) ? "" : ("  other CPU " + pct(res.other)).c_str());
        note(buf);
      }
      results.push_back(res);
    }
  }
  const double other_all = whole.other_fraction();

  // ---- report (rank 0) ----
  std::vector<std::string> missed, met;
  int n_floors = 0;
  if (g_rank == 0) {
    emit(
        "| op | impl | size (B) | count | p50 us | p99 us | algbw GB/s | busbw GB/s | busbw sx/MPI | floor | check | "
        "other CPU |");
    emit("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|");
    for (const Result& r : results) {
      if (r.sx.p50_us != r.sx.p50_us) {  // not timed
        emit("| " + r.op + " | scatterx | " + std::to_string(r.bytes) + " | " + std::to_string(r.count) +
             " | - | - | - | - | - | - | " + r.check + " | - |");
        continue;
      }
      std::string floor_cell = "-";
      if (r.floor > 0) {
        ++n_floors;
        const double ratio = r.ratio();
        const bool ok = ratio >= r.floor;
        floor_cell = ">= " + fmt("%.1fx", r.floor) + (ok ? " met" : " **missed**");
        std::string what =
            r.op + " " + human(r.nominal) + ": " + fmt("%.2fx", ratio) + (ok ? " >= " : " < ") + fmt("%.1fx", r.floor);
        if (!ok) what += " (" + fmt("%.0f%%", (1 - ratio / r.floor) * 100) + " short)";
        (ok ? met : missed).push_back(what);
      }
      const std::string other = pct(r.other) + (r.attempts > 1 ? " (" + std::to_string(r.attempts) + " runs)" : "");
      emit("| " + r.op + " | scatterx | " + std::to_string(r.bytes) + " | " + std::to_string(r.count) + " | " +
           fmt("%.1f", r.sx.p50_us) + " | " + fmt("%.1f", r.sx.p99_us) + " | " + fmt("%.3f", r.algbw(r.sx)) + " | " +
           fmt("%.3f", r.busbw(r.sx)) + " | " + fmt("%.2fx", r.ratio()) + " | " + floor_cell + " | " + r.check + " | " +
           other + " |");
      emit(std::string("| ") + r.op + " | MPI | " + std::to_string(r.bytes) + " | " + std::to_string(r.count) + " | " +
           fmt("%.1f", r.mpi.p50_us) + " | " + fmt("%.1f", r.mpi.p99_us) + " | " + fmt("%.3f", r.algbw(r.mpi)) + " | " +
           fmt("%.3f", r.busbw(r.mpi)) + " | | | | |");
    }
    emit("");
    {
      std::ostringstream s;
      s << "Pairs: ";
      for (size_t i = 0; i < opt.ops.size(); ++i) {
        s << (i ? "; " : "") << opt.ops[i] << " = scatterx " << sx_name(opt.ops[i]) << " vs "
          << native_name(opt.ops[i]);
      }
      s << ". busbw sx/MPI = scatterx busbw / MPI busbw at the medians. other CPU = share of all CPUs used by other "
        << "processes (or stolen) while the op and size ran, from /proc/stat; above " << pct(opt.noisy)
        << " it is run again (up to " << opt.retries << " times) and the quietest run is shown.";
      emit(s.str());
    }
    emit("Other processes used " + pct(other_all) + " of the CPUs over the whole run.");
    if (n_floors == 0) {
      emit("Floors: not evaluated (they apply with 2 ranks at 16 to 64 MiB; this run had " + std::to_string(g_ws) +
           " ranks and sizes " + human(opt.min_bytes) + " to " + human(opt.max_bytes) + ").");
    } else if (missed.empty()) {
      std::string s = "Floors: all " + std::to_string(n_floors) + " met (";
      for (size_t i = 0; i < met.size(); ++i) s += (i ? "; " : "") + met[i];
      emit(s + ").");
    } else {
      std::string s = "Floors: " + std::to_string(n_floors - static_cast<int>(missed.size())) + " of " +
                      std::to_string(n_floors) + " met; missed: ";
      for (size_t i = 0; i < missed.size(); ++i) s += (i ? "; " : "") + missed[i];
      if (!met.empty()) {
        s += ". Met: ";
        for (size_t i = 0; i < met.size(); ++i) s += (i ? "; " : "") + met[i];
      }
      emit(s + ".");
    }
    emit(failures ? "CHECKS: " + std::to_string(failures) + " op/size pairs FAILED (see the FAIL lines)."
                  : std::string("Checks: all results agree with MPI's (bit-identical for all_gather and the "
                                "all-to-alls; sums within tolerance)."));
    if (!opt.markdown.empty()) {
      std::FILE* f = std::fopen(opt.markdown.c_str(), "w");
      if (!f) {
        std::fprintf(stderr, "cannot write %s\n", opt.markdown.c_str());
      } else {
        for (const auto& l : lines) std::fprintf(f, "%s\n", l.c_str());
        std::fclose(f);
      }
    }
  }

  int status = 0;
  if (g_rank == 0) status = failures ? 1 : (opt.strict && !missed.empty()) ? 1 : 0;
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (env.types.user_op) MPI_Op_free(&env.types.sum);
  MPI_Comm_free(&env.native);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_ws);
  int status = 0;
  try {
    status = run(argc, argv);  // the scatterx communicator is freed when run() returns
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", g_rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
