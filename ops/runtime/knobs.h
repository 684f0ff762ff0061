// Every SCATTERX_* environment variable the library reads, declared once:
// its name, what it takes, its default and one line of doc. The readers below
// parse and validate; a bad value raises ArgumentError naming the variable,
// what it takes and what it got (never silently the default). README's
// "Environment" table lists the same rows (tests/knobs_test.cpp checks).
//
// Each call reads the environment afresh; callers that want a value for the
// life of the process keep the first one (as the op and collective paths do).
#pragma once

#include <cstdint>
#include <string>

namespace scatterx::detail {

enum class KnobKind {
  Bytes,    // a whole number of bytes within [min, max]
  Seconds,  // a positive number of seconds
  Flag,     // 0 or 1 (also false/true, off/on, no/yes)
  Choice,   // one of the words in `choices` ("a|b|c")
};

// X(id, variable, kind, default, min, max, choices, test_only, doc)
#define SCATTERX_KNOBS(X)                                                                                           \
  X(CpuIsa, "SCATTERX_CPU_ISA", Choice, "auto", 0, 0, "auto|baseline", false,                                       \
    "CPU kernels: auto picks the AVX2 build where the CPU has it; baseline forces the portable one")                \
  X(StreamingStoreBytes, "SCATTERX_STREAMING_STORE_BYTES", Bytes, "33554432", 0, int64_t{1} << 62, "", false,       \
    "row gathers whose output is at least this large write with non-temporal stores; so does the scatter's split "  \
    "by destination blocks where it and the source rows its fold reads add up to this")                             \
  X(HostCacheBytes, "SCATTERX_HOST_CACHE_BYTES", Bytes, "1073741824", 0, int64_t{1} << 62, "", false,               \
    "freed CPU tensors and kernel scratch kept for reuse, so their pages are not faulted in again; 0 keeps none")   \
  X(ShareableHostBytes, "SCATTERX_SHAREABLE_HOST_BYTES", Bytes, "268435456", 0, int64_t{1} << 40, "", false,        \
    "CPU tensors of 64 KiB to 8 MiB live in memory files that peers on the host map (single-copy reads by memcpy) " \
    "up to this many bytes; 0 none")                                                                                \
  X(DistTimeout, "SCATTERX_DIST_TIMEOUT", Seconds, "600", 0, 0, "", false,                                          \
    "seconds a collective waits for its peers before raising DistTimeoutError (default of the timeout option)")     \
  X(DistChecks, "SCATTERX_DIST_CHECKS", Flag, "0", 0, 0, "", false,                                                 \
    "check the dense collectives' arguments across ranks first (default of the checks option)")                     \
  X(DistChunkBytes, "SCATTERX_DIST_CHUNK_BYTES", Bytes, "524288", 1, int64_t{1} << 40, "", false,                   \
    "pipelining chunk of the host rings (default of the chunk_bytes option)")                                       \
  X(DistShm, "SCATTERX_DIST_SHM", Flag, "1", 0, 0, "", false,                                                       \
    "reduce-scatter through a shared-memory segment when every rank is on one host (default of the shared_memory "  \
    "option)")                                                                                                      \
  X(DistAllReduceSmallBytes, "SCATTERX_DIST_ALLREDUCE_SMALL_BYTES", Bytes, "65536", 0, int64_t{1} << 24, "", false, \
    "all_reduce of fewer bytes than this, and all-gathers of blocks and broadcasts of fewer, take the latency "     \
    "path (shared-memory slots on one host; all_reduce: recursive doubling between hosts); 0 never")                \
  X(DistSingleCopy, "SCATTERX_DIST_SINGLE_COPY", Flag, "1", 0, 0, "", false,                                        \
    "all-gathers, all-to-alls and broadcasts read large messages straight out of the peers' memory, reduce-"        \
    "scatters and all-reduces fold out of it and all-reduces write into it, when every rank is on one host "        \
    "(default of the single_copy option)")                                                                          \
  X(DistBroadcastRootShare, "SCATTERX_DIST_BROADCAST_ROOT_SHARE", Choice, "auto", 0, 0, "auto|0|1", false,          \
    "single-copy broadcasts of 512 KiB or more: the root writes a share into every peer while they read the rest; " \
    "auto where a host has no more ranks than cores, 0 never, 1 always (agreed by the ranks)")                      \
  X(DistShmStream, "SCATTERX_DIST_SHM_STREAM", Choice, "auto", 0, 0, "auto|0|1", false,                             \
    "shared-memory slots written with non-temporal stores: auto while plain copies are slow, 0 never, 1 always")    \
  X(DistCudaAware, "SCATTERX_DIST_CUDA_AWARE", Flag, "1", 0, 0, "", false,                                          \
    "hand device buffers to MPI when it reports CUDA support; 0 stages them through pinned host memory")            \
  X(DistStagingChunkBytes, "SCATTERX_DIST_STAGING_CHUNK_BYTES", Bytes, "2097152", 1, int64_t{1} << 30, "", false,   \
    "chunk of device data staged through pinned host slots")                                                        \
  X(DistEmulateDevice, "SCATTERX_DIST_EMULATE_DEVICE", Choice, "off", 0, 0, "off|staged|direct", true,              \
    "test only: CPU tensors take the CUDA tensors' paths on an emulated device whose work runs late")

enum class Knob {
#define SCATTERX_KNOB_ID(id, ...) id,
  SCATTERX_KNOBS(SCATTERX_KNOB_ID)
#undef SCATTERX_KNOB_ID
};

struct KnobSpec {
  Knob knob;
  const char* variable;
  KnobKind kind;
  const char* default_value;
  int64_t min;
  int64_t max;
  const char* choices;
  bool test_only;
  const char* doc;
};

const KnobSpec& knob_spec(Knob knob);
// All knobs, in declaration order: `count` of them.
const KnobSpec* all_knobs(int* count);

// The variable's value, or its default when unset or empty.
int64_t knob_bytes(Knob knob);
double knob_seconds(Knob knob);
bool knob_flag(Knob knob);
std::string knob_choice(Knob knob);

}  // namespace scatterx::detail
