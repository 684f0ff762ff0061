// The size of the CPU's last-level cache, for kernels that choose how to work
// by whether their working set stays in it (the unsorted scatter fold).
#pragma once

#include <cstdint>

namespace scatterx::detail {

// Bytes of the largest cache cpu0 reports: glibc's sysconf, else sysfs
// (/sys/devices/system/cpu/cpu0/cache), else a conservative 8 MiB. Read once
// per process.
int64_t last_level_cache_bytes();

}  // namespace scatterx::detail
