// The CUDA backend's controls. The ops themselves need nothing from here:
// every op in gather.h and scatter.h runs on the GPU when its tensors are CUDA
// tensors (TensorView with Device::cuda(n)), with the CPU backend's semantics.
//
// Streams. An op on CUDA tensors is enqueued on the calling thread's current
// stream (the legacy default stream unless a StreamGuard says otherwise) and
// returns without waiting for it, except where it must return a host value:
// the index check below. Outputs it allocates are stream-ordered on that
// stream. The Python bindings set the caller's current torch / CuPy stream.
//
// Index checks. An out-of-range index raises IndexError with the CPU
// backend's message and writes nothing. On the GPU that costs one pass over
// the index and one stream synchronization per op (the flag must reach the
// host before the op may write). set_index_checks(false) skips both, for
// callers who validate their indices themselves; an out-of-range index is
// then skipped by the kernels (never written out of bounds, never a
// device-side assert), and its destination keeps an unspecified value.
//
// CUDA graphs. With index checks off, index_select_out, index_add_ and
// index_add_weighted_ neither synchronize nor copy to the host: captured
// into a CUDA graph on a capturing stream, a GNN layer and an MoE combine
// replay with the reference's results (tested on an H200). Other ops have
// not been tried under capture. With checks on, the check's synchronization
// ends a capture with an error.
//
// Determinism. With set_deterministic(true), scatters never use atomics:
// positions (elements, or whole rows for index_add_ and an expanded index)
// are stably radix-sorted by destination and each destination folds its
// values in a fixed order, so float sums and means are bit-identical run to
// run. A destination of up to 64 values folds them in index order, the CPU
// backend's, and equals it bit for bit; a longer one folds chunks of 64 in
// parallel, then the chunks in order (a hot destination costs a few
// parallel steps, not a serial walk). The default picks atomics, faster,
// whose float sums round in arrival order (but see ScatterPath below).
#pragma once

#include <cstdint>

namespace scatterx::cuda {

// Whether this build has the CUDA backend, and how many devices it sees
// (0 without the backend, a driver or a GPU).
bool is_built();
int device_count();

// The calling thread's current stream (a cudaStream_t; nullptr = the legacy
// default stream).
void* current_stream();

// Makes `stream` the calling thread's current stream (the Python bindings
// set the caller's torch / CuPy stream before each op).
void set_current_stream(void* stream);

// Makes `stream` the calling thread's current stream until destroyed.
class StreamGuard {
 public:
  explicit StreamGuard(void* stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  void* previous_;
};

// Waits for the calling thread's current stream; raises scatterx::Error with
// CUDA's message if work on it failed.
void synchronize();

// Process-wide switches (see above). Defaults: deterministic false, index
// checks true.
void set_deterministic(bool on);
bool deterministic();
void set_index_checks(bool on);
bool index_checks();

// How non-deterministic scatters with a reduce fold (deterministic mode
// always sorts). Auto, the default, takes atomics unless the index check
// found a destination so hot that its atomics would serialize (power-law
// degrees, skewed routing), and then sorts by destination and folds each
// hot destination's values in parallel pieces. Folds that are a
// compare-and-swap loop every value must win (prod, the sums of 8- and
// 16-bit integers) sort as soon as the hottest destination expects a few
// hundred values, adds and extrema only when it draws half of the index.
// The measure rides on the index check: with checks off, Auto takes atomics.
// Atomic and Sorted force a path (for benchmarks, or callers who know their
// indices).
enum class ScatterPath { Auto, Atomic, Sorted };
void set_scatter_path(ScatterPath path);
ScatterPath scatter_path();

}  // namespace scatterx::cuda
