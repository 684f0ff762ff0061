// The report: rank 0 prints it to stdout (and --markdown writes it to a file):
// two lines of context, the markdown table (a scatterx row and an MPI row per
// op and size), and the summary: the pairs, the other processes' CPU share,
// the floors' verdict and the checks'. Progress and failures go to stderr.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "options.h"

namespace scatterx_bench_collectives {

// The q-quantile of v, interpolated linearly between order statistics; NaN when v is empty.
double quantile(std::vector<double> v, double q);

struct Timing {
  double p50_us = NAN, p99_us = NAN;
};

// One op and size, as measured (on rank 0).
struct Result {
  std::string op;
  int64_t nominal = 0, bytes = 0, count = 0;
  double bus_factor = 1;
  Timing sx, mpi;  // NaN: not timed (the check failed with an error)
  std::string check;
  bool failed = false;
  double other = NAN;
  int attempts = 1;
  double floor = 0;  // 0: none at this size / world size

  double algbw(const Timing& t) const { return static_cast<double>(bytes) / (t.p50_us * 1e-6) / 1e9; }
  double busbw(const Timing& t) const { return algbw(t) * bus_factor; }
  double ratio() const { return busbw(sx) / busbw(mpi); }
};

// "64 MiB", "3 KiB", "960 B".
std::string human(int64_t bytes);
// printf of one number; "-" for NaN.
std::string fmt(const char* f, double v);
// "12%"; "-" for NaN.
std::string pct(double v);

// The report's lines, printed as they come on rank 0 and kept for --markdown;
// on the other ranks every call does nothing.
class Report {
 public:
  void emit(const std::string& line);        // stdout, and the markdown file
  void note(const std::string& line) const;  // stderr only: progress and failures
  void write_markdown(const std::string& path) const;

 private:
  std::vector<std::string> lines_;
};

// The context lines: library, MPI, ranks and hosts, CPU, and the method. Collective (it gathers the host names).
void print_context(Report& report, const Options& opt, bool timed_checks, bool user_op);

// Which floors the results met and missed ("all_gather 16 MiB: 0.95x >= 0.9x").
struct FloorVerdicts {
  int evaluated = 0;
  std::vector<std::string> met, missed;
};

// The table, one scatterx row and one MPI row per result; returns the floors' verdicts. Rank 0.
FloorVerdicts print_table(Report& report, const std::vector<Result>& results);

// The results as JSON (format "scatterx-bench-results/1", suite "collectives",
// documented in python_bindings/scatterx/bench/results.py): a scatterx row and a
// native row (impl "mpi"; "memcpy" for the copy op) per timed op and size;
// NaN figures are written as null. Rank 0; a file that cannot be written is
// reported on stderr.
void write_json(const std::string& path, const Options& opt, const std::vector<Result>& results);

// The lines below the table. Rank 0.
void print_summary(Report& report, const Options& opt, const FloorVerdicts& floors, double other_all, int failures);

}  // namespace scatterx_bench_collectives
