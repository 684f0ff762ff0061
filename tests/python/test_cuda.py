"""scatterx on torch CUDA tensors and CuPy arrays, against torch's own CUDA ops.

Runs where the package was built with the CUDA backend and a GPU is visible
(scripts/gpu_suite.sh's machines); elsewhere every GPU test skips and says
why. test_switches_without_backend runs everywhere.
"""

import numpy as np
import pytest

import scatterx

from conftest import import_torch

NO_GPU = "needs a scatterx build with the CUDA backend and a visible GPU"


def gpu_torch():
    torch = import_torch()
    if not scatterx.cuda.is_built() or scatterx.cuda.device_count() == 0 or not torch.cuda.is_available():
        pytest.skip(NO_GPU)
    return torch


def test_switches_without_backend():
    if scatterx.cuda.is_built():
        pytest.skip("this build has the CUDA backend")
    assert scatterx.cuda.device_count() == 0
    assert scatterx.cuda.index_checks()
    assert not scatterx.cuda.deterministic()
    assert scatterx.cuda.scatter_path() == "auto"


def test_scatter_path_names_are_checked():
    with pytest.raises(ValueError, match="set_scatter_path: expected path to be one of 'auto', 'atomic', 'sorted', got 'fast'"):
        scatterx.cuda.set_scatter_path("fast")


REDUCES = ["sum", "prod", "mean", "amax", "amin"]
DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int64"]


@pytest.mark.parametrize("mode", ["atomic", "sorted", "deterministic"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_reduce_matches_torch(dtype, reduce, include_self, mode):
    torch = gpu_torch()
    dt = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(7)
    # Values whose fold no order changes: positive sums, and for products
    # factors near one, so no partial product overflows float16 in one order
    # and not in another.
    low, width = (0.9, 0.2) if reduce == "prod" else (0.5, 4.0)
    self_ = (torch.rand(40, 9, device="cuda", generator=gen) * width + low).to(dt)
    src = (torch.rand(300, 9, device="cuda", generator=gen) * width + low).to(dt)
    index = torch.randint(0, 40, (300, 9), device="cuda", generator=gen)
    expected = self_.scatter_reduce(0, index, src, reduce, include_self=include_self)
    scatterx.cuda.set_deterministic(mode == "deterministic")
    scatterx.cuda.set_scatter_path("auto" if mode == "deterministic" else mode)
    try:
        got = scatterx.scatter_reduce(self_, 0, index, src, reduce, include_self=include_self)
        assert scatterx.cuda.scatter_path() == ("auto" if mode == "deterministic" else mode)
    finally:
        scatterx.cuda.set_deterministic(False)
        scatterx.cuda.set_scatter_path("auto")
    assert got.is_cuda and got.device == self_.device and got.dtype == dt
    if dt.is_floating_point and reduce in ("sum", "mean", "prod"):
        tol = {"float16": 2e-2, "bfloat16": 1e-1}.get(dtype, 1e-5)
        torch.testing.assert_close(got, expected, rtol=tol, atol=tol)
    else:
        assert torch.equal(got, expected)


@pytest.mark.parametrize("dtype", DTYPES + ["complex64", "bool"])
def test_gather_index_select_index_add(dtype):
    torch = gpu_torch()
    dt = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(3)
    table = (torch.rand(50, 33, device="cuda", generator=gen) * 3).to(dt)
    rows = torch.randint(0, 50, (70,), device="cuda", generator=gen)
    assert torch.equal(scatterx.index_select(table, 0, rows), torch.index_select(table, 0, rows))
    index = torch.randint(0, 50, (20, 33), device="cuda", generator=gen)
    assert torch.equal(scatterx.gather(table, 0, index), torch.gather(table, 0, index))
    if dtype != "bool":
        source = (torch.rand(70, 33, device="cuda", generator=gen) * 3).to(dt)
        got = scatterx.index_add(table, 0, rows, source)
        expected = table.index_add(0, rows, source)
        if dt.is_floating_point or dt.is_complex:
            torch.testing.assert_close(got, expected, rtol=1e-1 if dt in (torch.float16, torch.bfloat16) else 1e-5,
                                       atol=1e-1 if dt in (torch.float16, torch.bfloat16) else 1e-5)
        else:
            assert torch.equal(got, expected)


def test_in_place_writes_the_callers_tensor_on_its_stream():
    torch = gpu_torch()
    stream = torch.cuda.Stream()
    self_ = torch.zeros(1000, 64, device="cuda")
    src = torch.ones(20000, 64, device="cuda")
    index = torch.randint(0, 1000, (20000,), device="cuda")
    expected = torch.zeros(1000, 64, device="cuda").index_add_(0, index, src)
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        out = scatterx.index_add_(self_, 0, index, src)
    stream.synchronize()
    assert out is self_
    torch.testing.assert_close(self_, expected)


def test_out_of_range_raises_index_error_and_gpu_stays_usable():
    torch = gpu_torch()
    self_ = torch.zeros(4, device="cuda")
    with pytest.raises(IndexError, match=r"scatter_add_: index 9 is out of bounds for dimension 0 with size 4"):
        scatterx.scatter_add_(self_, 0, torch.tensor([0, 9], device="cuda"), torch.ones(2, device="cuda"))
    assert torch.count_nonzero(self_).item() == 0
    scatterx.scatter_add_(self_, 0, torch.tensor([0, 3], device="cuda"), torch.ones(2, device="cuda"))
    assert self_.tolist() == [1.0, 0.0, 0.0, 1.0]


def test_mixed_devices_are_refused():
    torch = gpu_torch()
    with pytest.raises(ValueError, match="expected index on self's device cuda:0, got cpu"):
        scatterx.scatter_add_(torch.zeros(4, device="cuda"), 0, torch.tensor([0]), torch.ones(1, device="cuda"))


def test_cupy_in_cupy_out():
    gpu_torch()
    cupy = pytest.importorskip("cupy", reason="cupy not installed")
    table = cupy.arange(60, dtype=cupy.float32).reshape(20, 3)
    rows = cupy.asarray(np.array([3, 0, 19], dtype=np.int64))
    got = scatterx.index_select(table, 0, rows)
    assert isinstance(got, cupy.ndarray)
    assert cupy.asnumpy(got).tolist() == cupy.asnumpy(table[rows]).tolist()


@pytest.mark.parametrize("path", ["auto", "atomic", "sorted"])
def test_hot_index_on_every_path_matches_torch(path):
    # Half of the values go to one destination: "auto" sorts (the index
    # check measures the share), "atomic" and "sorted" are forced.
    torch = gpu_torch()
    gen = torch.Generator(device="cuda").manual_seed(11)
    n = 1 << 17
    index = torch.where(
        torch.rand(n, device="cuda", generator=gen) < 0.5,
        torch.full((n,), 7, device="cuda"),
        torch.randint(0, 4096, (n,), device="cuda", generator=gen),
    )
    src = torch.rand(n, device="cuda", generator=gen, dtype=torch.float64)
    self_ = torch.rand(4096, device="cuda", generator=gen, dtype=torch.float64)
    scatterx.cuda.set_scatter_path(path)
    try:
        for reduce in ("sum", "mean", "amax"):
            got = scatterx.scatter_reduce(self_, 0, index, src, reduce)
            torch.testing.assert_close(got, self_.scatter_reduce(0, index, src, reduce), rtol=1e-9, atol=1e-9)
    finally:
        scatterx.cuda.set_scatter_path("auto")


def _autograd_cases():
    """test_autograd's cases (id, call, inputs, torch's op) where torch is importable, else none."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return []
    from test_autograd import CASES

    return CASES


AUTOGRAD_CASES = _autograd_cases()


@pytest.mark.parametrize("case", AUTOGRAD_CASES, ids=[c[0] for c in AUTOGRAD_CASES])
def test_backward_on_cuda_matches_torch(case):
    """The backward passes on CUDA tensors (their helper tensors must be made on the GPU too): gradcheck,
    and gradients equal to torch's CUDA ones."""
    torch = gpu_torch()
    import scatterx.torch as sxt

    _, call, inputs, torch_op = case
    s, i, x = (t.detach().cuda().requires_grad_(t.requires_grad) for t in inputs(21, small_index=False))
    out = call(scatterx, s, i, x)
    assert out.is_cuda and out.grad_fn is not None
    grad = torch.randn(out.shape, device="cuda", dtype=torch.float64)
    mine = torch.autograd.grad(out, (s, x), grad, allow_unused=True)
    theirs = torch.autograd.grad(torch_op(s, i, x), (s, x), grad, allow_unused=True)
    for m, t, like in zip(mine, theirs, (s, x)):
        m = torch.zeros_like(like) if m is None else m
        t = torch.zeros_like(like) if t is None else t
        assert m.is_cuda
        torch.testing.assert_close(m, t, rtol=1e-10, atol=1e-10)
    assert torch.autograd.gradcheck(lambda s, x: call(sxt, s, i, x), (s, x), eps=1e-6, atol=1e-5)


def test_index_add_weighted_backward_on_cuda():
    torch = gpu_torch()
    gen = torch.Generator(device="cuda").manual_seed(5)
    s = torch.randn(5, 3, device="cuda", dtype=torch.float64, generator=gen, requires_grad=True)
    x = torch.randn(6, 3, device="cuda", dtype=torch.float64, generator=gen, requires_grad=True)
    w = torch.rand(6, device="cuda", dtype=torch.float64, generator=gen, requires_grad=True)
    index = torch.tensor([4, 0, 4, 2, 0, 4], device="cuda")
    assert torch.autograd.gradcheck(lambda s, x, w: scatterx.index_add_weighted(s, 0, index, x, w), (s, x, w),
                                    eps=1e-6, atol=1e-5)
    mine = torch.autograd.grad(scatterx.index_add_weighted(s, 0, index, x, w).sum(), (s, x, w))
    theirs = torch.autograd.grad(s.index_add(0, index, x * w[:, None]).sum(), (s, x, w))
    for m, t in zip(mine, theirs):
        torch.testing.assert_close(m, t)
