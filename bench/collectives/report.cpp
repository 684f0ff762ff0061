#include "report.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sstream>

#include "floors.h"
#include "ops/version.h"
#include "world.h"

namespace scatterx_bench_collectives {
namespace {

// What an op's two columns run, by name in the report and by impl in the JSON rows. A limit times no
// scatterx call (copies the collectives are read against); one whose columns run the same code has no
// sx_impl and writes one JSON row.
struct OpColumns {
  const char* op;
  const char* sx;
  const char* native;
  bool limit;
  const char* sx_impl;  // nullptr: the native column's code
  const char* native_impl;
};
constexpr OpColumns kOpColumns[] = {
    {"reduce_scatter", "reduce_scatter_tensor", "MPI_Reduce_scatter_block", false, "scatterx", "mpi"},
    {"all_gather", "all_gather_into_tensor", "MPI_Allgather", false, "scatterx", "mpi"},
    {"all_reduce", "all_reduce", "MPI_Allreduce", false, "scatterx", "mpi"},
    {"broadcast", "broadcast", "MPI_Bcast", false, "scatterx", "mpi"},
    {"all_to_all_v", "all_to_all_v", "MPI_Alltoallv", false, "scatterx", "mpi"},
    {"all_to_all_single", "all_to_all_single", "MPI_Alltoallv", false, "scatterx", "mpi"},
    {"copy", "memcpy", "memcpy", true, nullptr, "memcpy"},
    {"peer_copy", "process_vm_readv", "shm memcpy", true, "cma", "memcpy"},
    {"all_reduce_copies", "memcpy + fold", "memcpy + fold", true, nullptr, "memcpy"},
};

// op is canonical (options.cpp's canonical_op names only these).
const OpColumns& columns_of(const std::string& op) {
  for (const OpColumns& c : kOpColumns) {
    if (op == c.op) return c;
  }
  std::fprintf(stderr, "scatterx_bench_collectives: no columns for op '%s'\n", op.c_str());
  std::abort();
}

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

// The MPI library's version, up to its first newline or comma ("Open MPI v4.1.4").
std::string mpi_library() {
  char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int lib_len = 0;
  MPI_Get_library_version(lib, &lib_len);
  std::string libs(lib, static_cast<size_t>(lib_len));
  if (const auto nl = libs.find_first_of("\n,"); nl != std::string::npos) libs.resize(nl);
  return libs;
}

// Collective: the number of distinct host names among the ranks (on rank 0; 0 elsewhere).
int count_hosts() {
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
  return nhosts;
}

// The floor column of r's scatterx row ("-", ">= 3.0x met"), recording the verdict.
std::string floor_cell(const Result& r, FloorVerdicts& floors) {
  if (!(r.floor > 0)) return "-";
  ++floors.evaluated;
  const double ratio = r.ratio();
  const bool ok = ratio >= r.floor;
  std::string what =
      r.op + " " + human(r.nominal) + ": " + fmt("%.2fx", ratio) + (ok ? " >= " : " < ") + fmt("%.1fx", r.floor);
  if (!ok) what += " (" + fmt("%.0f%%", (1 - ratio / r.floor) * 100) + " short)";
  (ok ? floors.met : floors.missed).push_back(what);
  return ">= " + fmt("%.1fx", r.floor) + (ok ? " met" : " **missed**");
}

// "a; b; c"
std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) s += (i ? "; " : "") + items[i];
  return s;
}

std::string pairs_line(const Options& opt) {
  std::ostringstream s;
  s << "Pairs: ";
  for (size_t i = 0; i < opt.ops.size(); ++i) {
    const OpColumns& c = columns_of(opt.ops[i]);
    s << (i ? "; " : "") << opt.ops[i] << " = " << (c.limit ? "" : "scatterx ") << c.sx << " vs " << c.native;
  }
  s << ". busbw sx/MPI = scatterx busbw / MPI busbw at the medians. other CPU = share of all CPUs used by other "
    << "processes (or stolen) while the op and size ran, from /proc/stat; above " << pct(opt.noisy)
    << " it is run again (up to " << opt.retries << " times) and the quietest run is shown.";
  return s.str();
}

std::string floors_line(const Options& opt, const FloorVerdicts& floors) {
  if (floors.evaluated == 0) {
    return "Floors: not evaluated (they apply with " + floors_ranks() + " at " + floors_sizes() + "; this run had " +
           std::to_string(g_ws) + " ranks and sizes " + human(opt.min_bytes) + " to " + human(opt.max_bytes) + ").";
  }
  if (floors.missed.empty()) {
    return "Floors: all " + std::to_string(floors.evaluated) + " met (" + join(floors.met) + ").";
  }
  std::string s = "Floors: " + std::to_string(floors.evaluated - static_cast<int>(floors.missed.size())) + " of " +
                  std::to_string(floors.evaluated) + " met; missed: " + join(floors.missed);
  if (!floors.met.empty()) s += ". Met: " + join(floors.met);
  return s + ".";
}

// s as a JSON string literal (quotes, backslashes and control characters escaped).
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// A JSON number with 6 significant digits; null for NaN or infinity.
std::string json_number(double v) { return std::isfinite(v) ? fmt("%.6g", v) : "null"; }

// One row of the JSON file: an implementation's figures for r.
std::string json_row(const Result& r, const char* impl, const Timing& t, const Options& opt) {
  return "{\"op\": " + json_string(r.op) + ", \"impl\": \"" + impl + "\", \"ranks\": " + std::to_string(g_ws) +
         ", \"bytes\": " + std::to_string(r.bytes) + ", \"count\": " + std::to_string(r.count) + ", \"dtype\": \"" +
         scatterx::dtype_name(opt.dtype) + "\", \"median_us\": " + json_number(t.p50_us) +
         ", \"p99_us\": " + json_number(t.p99_us) + ", \"algbw_gbps\": " + json_number(r.algbw(t)) +
         ", \"busbw_gbps\": " + json_number(r.busbw(t)) + "}";
}

}  // namespace

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
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

void Report::emit(const std::string& line) {
  if (g_rank != 0) return;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  lines_.push_back(line);
}

void Report::note(const std::string& line) const {
  if (g_rank != 0) return;
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

void Report::write_markdown(const std::string& path) const {
  if (g_rank != 0) return;
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return;
  }
  for (const auto& l : lines_) std::fprintf(f, "%s\n", l.c_str());
  std::fclose(f);
}

void print_context(Report& report, const Options& opt, bool timed_checks, bool user_op) {
  const std::string libs = mpi_library();
  const int nhosts = count_hosts();
  const char* omp = std::getenv("OMP_NUM_THREADS");
  report.emit(std::string("scatterx ") + SCATTERX_VERSION + ", " + libs + "; " + std::to_string(g_ws) + " ranks on " +
              std::to_string(nhosts) + " host(s); CPU: " + cpu_model() + ", " +
              std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) +
              " logical CPUs; OMP_NUM_THREADS=" + (omp ? omp : "(unset)"));
  std::ostringstream s;
  s << "dtype " << scatterx::dtype_name(opt.dtype) << "; sizes " << human(opt.min_bytes) << " to "
    << human(opt.max_bytes) << " (x" << opt.factor << "); "
    << (opt.iters ? std::to_string(opt.iters) + " timed calls"
                  : std::string("20 * sqrt(64 MiB / size) timed calls "
                                "(20 to 200)"))
    << " per implementation after " << opt.warmup << " warm-up calls, interleaved, barrier before each; time = "
    << "slowest rank; p50 / p99 over calls; scatterx cross-rank checks during timing: " << (timed_checks ? "on" : "off")
    << (user_op ? "; MPI bfloat16 sums use a user-defined MPI_Op" : "");
  report.emit(s.str());
  report.emit("");
}

FloorVerdicts print_table(Report& report, const std::vector<Result>& results) {
  FloorVerdicts floors;
  report.emit(
      "| op | impl | size (B) | count | p50 us | p99 us | algbw GB/s | busbw GB/s | busbw sx/MPI | floor | check | "
      "other CPU |");
  report.emit("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|");
  for (const Result& r : results) {
    const std::string head = "| " + r.op + " | scatterx | " + std::to_string(r.bytes) + " | " + std::to_string(r.count);
    if (std::isnan(r.sx.p50_us)) {  // not timed
      report.emit(head + " | - | - | - | - | - | - | " + r.check + " | - |");
      continue;
    }
    const std::string floor = floor_cell(r, floors);
    const std::string other = pct(r.other) + (r.attempts > 1 ? " (" + std::to_string(r.attempts) + " runs)" : "");
    report.emit(head + " | " + fmt("%.1f", r.sx.p50_us) + " | " + fmt("%.1f", r.sx.p99_us) + " | " +
                fmt("%.3f", r.algbw(r.sx)) + " | " + fmt("%.3f", r.busbw(r.sx)) + " | " + fmt("%.2fx", r.ratio()) +
                " | " + floor + " | " + r.check + " | " + other + " |");
    report.emit(std::string("| ") + r.op + " | MPI | " + std::to_string(r.bytes) + " | " + std::to_string(r.count) +
                " | " + fmt("%.1f", r.mpi.p50_us) + " | " + fmt("%.1f", r.mpi.p99_us) + " | " +
                fmt("%.3f", r.algbw(r.mpi)) + " | " + fmt("%.3f", r.busbw(r.mpi)) + " | | | | |");
  }
  report.emit("");
  return floors;
}

void write_json(const std::string& path, const Options& opt, const std::vector<Result>& results) {
  if (g_rank != 0) return;
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return;
  }
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::fprintf(f,
               "{\"format\": \"scatterx-bench-results/1\", \"suite\": \"collectives\", "
               "\"tool\": \"scatterx_bench_collectives\",\n \"date\": \"%s\", \"machine\": {\"cpu\": %s, "
               "\"logical_cpus\": %ld, \"mpi\": %s},\n \"rows\": [",
               date, json_string(cpu_model()).c_str(), sysconf(_SC_NPROCESSORS_ONLN),
               json_string(mpi_library()).c_str());
  const char* sep = "\n  ";
  for (const Result& r : results) {
    if (std::isnan(r.sx.p50_us)) continue;  // not timed: its check failed with an error
    const OpColumns& c = columns_of(r.op);
    if (c.sx_impl != nullptr) {
      std::fprintf(f, "%s%s", sep, json_row(r, c.sx_impl, r.sx, opt).c_str());
      sep = ",\n  ";
    }
    std::fprintf(f, "%s%s", sep, json_row(r, c.native_impl, r.mpi, opt).c_str());
    sep = ",\n  ";
  }
  std::fprintf(f, "\n]}\n");
  std::fclose(f);
}

void print_summary(Report& report, const Options& opt, const FloorVerdicts& floors, double other_all, int failures) {
  report.emit(pairs_line(opt));
  report.emit("Other processes used " + pct(other_all) + " of the CPUs over the whole run.");
  report.emit(floors_line(opt, floors));
  report.emit(failures ? "CHECKS: " + std::to_string(failures) + " op/size pairs FAILED (see the FAIL lines)."
                       : std::string("Checks: all results agree with MPI's (bit-identical for all_gather and the "
                                     "all-to-alls; sums within tolerance)."));
}

}  // namespace scatterx_bench_collectives
