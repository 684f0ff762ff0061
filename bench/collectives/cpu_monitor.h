// Other processes' share of the machine's CPU time, from /proc/stat (time
// stolen by the hypervisor included) less the ranks' own CPU time: how much a
// block of measurements may have been disturbed. Only meaningful when all
// ranks share the machine.
#pragma once

namespace scatterx_bench_collectives {

// Collective: every rank calls start() and other_fraction(); the fraction is valid on rank 0.
class CpuMonitor {
 public:
  void start();
  // Other processes' CPU time since start() over the time all CPUs had; NaN on
  // the other ranks, and when the block was too short to tell.
  double other_fraction() const;

 private:
  double wall0_ = 0, own0_ = 0, busy0_ = 0;
};

// Collective: sleeps in 1 s steps (all ranks idle) until other processes use less than `noisy` of the
// CPUs, at most limit_s; returns the wait (on every rank).
double wait_quiet(double noisy, double limit_s);

}  // namespace scatterx_bench_collectives
