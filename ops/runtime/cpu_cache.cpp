#include "ops/runtime/cpu_cache.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace scatterx::detail {
namespace {

// Smaller than the last-level cache of any current x86 or Arm server part, so
// a wrong guess only costs the faster path, never a thrashing one.
constexpr int64_t kFallbackCacheBytes = int64_t{8} << 20;

int64_t from_sysconf() {
#ifdef _SC_LEVEL3_CACHE_SIZE
  for (const int name : {_SC_LEVEL4_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long bytes = sysconf(name);
    if (bytes > 0) return bytes;
  }
#endif
  return 0;
}

// sysfs sizes read "32768K" or "32M".
int64_t parse_size(const std::string& text) {
  char* end = nullptr;
  const long long n = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || n <= 0) return 0;
  switch (*end) {
    case 'K':
      return n << 10;
    case 'M':
      return n << 20;
    case 'G':
      return n << 30;
    default:
      return n;
  }
}

int64_t from_sysfs() {
  int best_level = 0;
  int64_t best_bytes = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_file(dir + "level");
    std::ifstream size_file(dir + "size");
    int level = 0;
    std::string size;
    if (!(level_file >> level) || !(size_file >> size)) break;
    const int64_t bytes = parse_size(size);
    if (bytes > 0 && level >= best_level) {
      best_level = level;
      best_bytes = bytes;
    }
  }
  return best_bytes;
}

}  // namespace

int64_t last_level_cache_bytes() {
  static const int64_t bytes = [] {
    if (const int64_t b = from_sysconf(); b > 0) return b;
    if (const int64_t b = from_sysfs(); b > 0) return b;
    return kFallbackCacheBytes;
  }();
  return bytes;
}

}  // namespace scatterx::detail
