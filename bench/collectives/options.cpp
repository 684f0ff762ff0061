#include "options.h"

#include <mpi.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "floors.h"

namespace scatterx_bench_collectives {
namespace {

namespace sx = scatterx;

const std::string& usage_text() {
  static const std::string text =
      "usage: mpirun -n N scatterx_bench_collectives [options]\n"
      "  --min-bytes B      smallest size (default 1K; suffixes K, M, G = KiB, MiB, GiB)\n"
      "  --max-bytes B      largest size (default 64M)\n"
      "  --factor F         size step (default 4)\n"
      "  --iters N          timed calls per implementation, op and size (default 0: 20 * sqrt(64 MiB / size),\n"
      "                     clamped to [20, 200])\n"
      "  --warmup N         untimed calls first (default 5)\n"
      "  --dtype T          float32 (default), bfloat16 or float64\n"
      "  --ops LIST         comma-separated: reduce_scatter, all_gather, all_reduce, all_to_all_v,\n"
      "                     all_to_all_single, broadcast (default: the first five), copy (every\n"
      "                     rank copies the all-gather's output size locally: the copy limit),\n"
      "                     peer_copy (the all-gather's bytes copied out of the peers' memory by\n"
      "                     process_vm_readv / from a shared mapping: the single-copy limits),\n"
      "                     all_reduce_copies (every rank makes an all-reduce's copies and fold in\n"
      "                     its own memory, then a barrier: the all-reduce without its exchange)\n"
      "  --markdown FILE    also write the report as markdown to FILE\n"
      "  --json FILE        also write the rows as JSON to FILE (scatterx-bench-results/1, documented in\n"
      "                     python_bindings/scatterx/bench/results.py; bench/plot.py draws them)\n"
      "  --strict           exit 1 when a floor is missed (" +
      floors_ranks() + ", " + floors_sizes() +
      ")\n"
      "  --retries N        reruns of an op and size during which other processes used more than\n"
      "                     --noisy of the CPUs (default 2)\n"
      "  --noisy F          that threshold (default 0.10)\n"
      "  --timeout S        scatterx communicator timeout in seconds (default 60)\n";
  return text;
}

[[noreturn]] void usage_error(const std::string& message) {
  if (g_rank == 0) std::fprintf(stderr, "error: %s\n%s", message.c_str(), usage_text().c_str());
  MPI_Finalize();
  std::exit(2);
}

sx::DType parse_dtype(const std::string& t) {
  if (t == "float32" || t == "float") return sx::DType::Float32;
  if (t == "bfloat16") return sx::DType::BFloat16;
  if (t == "float64" || t == "double") return sx::DType::Float64;
  usage_error("--dtype must be float32, bfloat16 or float64");
}

// "a,b,,a" -> the canonical names, each once, in order of first mention.
std::vector<std::string> parse_ops(const std::string& text) {
  std::vector<std::string> ops;
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    if (item.empty()) continue;
    const std::string op = canonical_op(item);
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
  }
  if (ops.empty()) usage_error("--ops names no op");
  return ops;
}

void validate(const Options& o) {
  if (o.min_bytes < 1 || o.max_bytes < o.min_bytes) usage_error("need 0 < --min-bytes <= --max-bytes");
  if (o.factor < 2) usage_error("--factor must be at least 2");
  if (o.iters < 0 || o.warmup < 0 || o.retries < 0) usage_error("--iters, --warmup, --retries must be >= 0");
  if (!(o.timeout_s > 0)) usage_error("--timeout must be positive");
}

}  // namespace

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
  if (name == "broadcast") return "broadcast";
  if (name == "copy") return "copy";
  if (name == "peer_copy") return "peer_copy";
  if (name == "all_reduce_copies") return "all_reduce_copies";
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
      if (g_rank == 0) std::fputs(usage_text().c_str(), stdout);
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
      o.dtype = parse_dtype(next());
    } else if (arg == "--ops") {
      o.ops = parse_ops(next());
    } else if (arg == "--markdown") {
      o.markdown = next();
    } else if (arg == "--json") {
      o.json = next();
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
  validate(o);
  return o;
}

}  // namespace scatterx_bench_collectives
