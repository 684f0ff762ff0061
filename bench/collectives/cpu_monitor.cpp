#include "cpu_monitor.h"

#include <mpi.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "world.h"

namespace scatterx_bench_collectives {
namespace {

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

}  // namespace

void CpuMonitor::start() {
  wall0_ = MPI_Wtime();
  own0_ = process_cpu_seconds();
  busy0_ = g_rank == 0 ? proc_busy_seconds() : 0;
}

double CpuMonitor::other_fraction() const {
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

}  // namespace scatterx_bench_collectives
