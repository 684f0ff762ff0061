"""The kernels run with the GIL released: concurrent calls from Python threads are correct, and other
Python threads make progress while a long kernel runs. Results do not depend on the thread count."""

import os
import subprocess
import sys
import threading
import time

import numpy as np

import scatterx as sx
from sx_reference import assert_same


def test_concurrent_calls_from_python_threads_are_correct():
    rng = np.random.default_rng(21)
    n, targets, nthreads = 400_000, 5_000, 4
    index = rng.integers(0, targets, size=n).astype(np.int32)
    index.flags.writeable = False  # shared, read by every thread
    srcs = [rng.integers(-1000, 1000, size=n).astype(np.int64) for _ in range(nthreads)]
    fsrc = rng.standard_normal(n).astype(np.float32)
    expected_sums = []
    for src in srcs:
        e = np.zeros(targets, np.int64)
        np.add.at(e, index, src)
        expected_sums.append(e)
    expected_mean = sx.scatter_reduce(np.zeros(targets, np.float32), 0, index, fsrc, "mean")  # serial, for bits
    expected_max = np.full(targets, -np.inf, np.float32)
    np.maximum.at(expected_max, index, fsrc)

    results = {}
    errors = []
    barrier = threading.Barrier(nthreads)

    def work(k):
        try:
            barrier.wait()
            for rep in range(3):
                out = np.zeros(targets, np.int64)
                assert sx.scatter_add_(out, 0, index, srcs[k]) is out
                results[(k, rep, "sum")] = out
                results[(k, rep, "mean")] = sx.scatter_reduce(np.zeros(targets, np.float32), 0, index, fsrc, "mean")
                results[(k, rep, "amax")] = sx.scatter_reduce(np.zeros(targets, np.float32), 0, index, fsrc, "amax",
                                                              include_self=False)
                results[(k, rep, "gather")] = sx.gather(srcs[k], 0, index.astype(np.int64) * 7)
        except Exception as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(nthreads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert len(results) == nthreads * 3 * 4
    for (k, rep, what), out in results.items():
        if what == "sum":
            assert_same(out, expected_sums[k], f"thread {k} rep {rep}")
        elif what == "mean":
            assert_same(out, expected_mean, f"thread {k} rep {rep} mean")
        elif what == "amax":
            hit = np.bincount(index, minlength=targets) > 0
            assert_same(out[hit], expected_max[hit], f"thread {k} rep {rep} amax")
        else:
            assert_same(out, srcs[k][index.astype(np.int64) * 7], f"thread {k} rep {rep} gather")


def _long_call():
    """A scatter that takes ~0.3 s here (float16 mean over a large self: accumulated in float)."""
    rng = np.random.default_rng(22)
    n = 1 << 20
    while True:
        self_ = np.zeros(n, np.float16)
        index = rng.integers(0, n, size=n).astype(np.int32)
        src = np.ones(n, np.float16)
        start = time.perf_counter()
        sx.scatter_reduce(self_, 0, index, src, "mean")
        took = time.perf_counter() - start
        if took >= 0.25 or n >= 1 << 23:
            return lambda: sx.scatter_reduce(self_, 0, index, src, "mean"), took
        n *= 2


def test_other_python_threads_run_while_a_kernel_runs():
    call, _ = _long_call()
    marks = []
    stop = threading.Event()

    def counter():
        n = 0
        while not stop.is_set():
            n += 1
            if n % 200 == 0:
                marks.append(time.perf_counter())

    thread = threading.Thread(target=counter, daemon=True)
    thread.start()
    try:
        time.sleep(0.05)
        inside = []
        for _ in range(3):  # a loaded machine may starve the counter once; the GIL would starve it every time
            start = time.perf_counter()
            call()
            end = time.perf_counter()
            middle = (start + 0.25 * (end - start), end - 0.25 * (end - start))
            inside.append(sum(middle[0] <= m <= middle[1] for m in list(marks)))
            if inside[-1] > 0:
                break
    finally:
        stop.set()
        thread.join()
    assert max(inside) > 0, f"no Python thread ran during the middle half of a {end - start:.3f}s kernel: {inside}"


_DETERMINISM = r"""
import hashlib, numpy as np, scatterx as sx
rng = np.random.default_rng(3)
h = hashlib.sha256()
s = rng.standard_normal((64, 300)).astype(np.float32)
i = rng.integers(0, 64, size=(3000, 300))
x = rng.standard_normal((3000, 300)).astype(np.float32)
for r in ("sum", "mean", "prod"):
    h.update(sx.scatter_reduce(s, 0, i, x, r).tobytes())
    h.update(sx.scatter_reduce(s.astype(np.float16), 0, i, x.astype(np.float16), r, include_self=False).tobytes())
h.update(sx.index_add(s, 0, i[:, 0], x, alpha=0.3).tobytes())
h.update(sx.index_reduce(s, 0, i[:, 0], x, "mean").tobytes())
print(h.hexdigest())
"""


def test_results_do_not_depend_on_the_thread_count():
    digests = set()
    for threads in ("1", "2", "3"):
        env = dict(os.environ, OMP_NUM_THREADS=threads)
        out = subprocess.run([sys.executable, "-c", _DETERMINISM], env=env, capture_output=True, text=True,
                             timeout=120, check=True)
        digests.add(out.stdout.strip())
    assert len(digests) == 1, digests
