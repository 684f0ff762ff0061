"""The fused scatter_softmax / scatter_log_softmax (a 1-d index over the rows of a CPU src) against the composite
path it replaced (forced by monkeypatching the dispatch), a float64 per-group torch.softmax reference, special
values, gradients (gradcheck in float64), an IndexPlan as the index, and the cases that keep the composite."""

import pytest

from conftest import TORCH_MISSING

torch = pytest.importorskip("torch", reason=TORCH_MISSING)

import scatterx  # noqa: E402
import scatterx.torch_scatter as ts  # noqa: E402
from scatterx.torch_scatter import _composite  # noqa: E402

TOL = {torch.float64: (1e-12, 1e-12), torch.float32: (1e-5, 1e-6), torch.float16: (4e-3, 1e-3),
       torch.bfloat16: (3e-2, 1e-2)}


def _composite_only(monkeypatch):
    monkeypatch.setattr(_composite, "_fused_plan", lambda *args: None)


def _reference(src, index, log):
    """Per-group torch.(log_)softmax along dim 0 in float64."""
    x = src.double()
    out = torch.empty_like(x)
    for n in index.unique().tolist():
        rows = (index == n).nonzero().flatten()
        out[rows] = (torch.log_softmax if log else torch.softmax)(x[rows], 0)
    return out


def _calls(spy):
    def wrapped(*args):
        spy.append(args)
        return original(*args)

    original = scatterx._C.scatter_softmax
    return wrapped


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(300, 64), (300, 1), (300, 131), (300, 3, 5), (300,), (0, 4)])
def test_fused_matches_reference_and_composite(monkeypatch, log, dtype, shape):
    g = torch.Generator().manual_seed(3)
    src = (torch.randn(shape, generator=g) * 4).to(dtype)
    index = torch.randint(0, 70, (shape[0],), generator=g)  # some of the 80 positions empty
    fn = ts.scatter_log_softmax if log else ts.scatter_softmax
    spy = []
    monkeypatch.setattr(scatterx._C, "scatter_softmax", _calls(spy))
    got = fn(src, index, dim=0, dim_size=80)
    assert len(spy) == 1  # the fused kernel ran
    assert got.dtype == dtype and got.shape == src.shape
    rtol, atol = TOL[dtype]
    assert torch.allclose(got.double(), _reference(src, index, log), rtol=rtol, atol=atol * (8 if log else 1))
    monkeypatch.undo()
    _composite_only(monkeypatch)
    want = fn(src, index, dim=0, dim_size=80)
    if dtype in (torch.float32, torch.float64):
        assert torch.allclose(got, want, rtol=rtol, atol=atol * (8 if log else 1))


@pytest.mark.parametrize("log", [False, True])
def test_special_values_as_the_composite(monkeypatch, log):
    inf, nan = float("inf"), float("nan")
    src = torch.tensor([[-inf, 1.0], [-inf, 2.0], [inf, -inf], [1.0, 0.0], [nan, 3.0], [1.0, 3.0], [-inf, -1e30],
                        [0.0, 1e30]])
    index = torch.tensor([0, 0, 1, 1, 2, 2, 4, 4])
    fn = ts.scatter_log_softmax if log else ts.scatter_softmax
    got = fn(src, index, dim=0)
    _composite_only(monkeypatch)
    want = fn(src, index, dim=0)
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.allclose(got.nan_to_num(0.0, 9.0, -9.0), want.nan_to_num(0.0, 9.0, -9.0), rtol=1e-6, atol=1e-6)
    assert got[0, 0].isnan() and got[2, 0].isnan() and got[3, 0].isnan() and got[5, 0].isnan()
    assert not got[4, 1].isnan() and not got[6, 1].isnan()


@pytest.mark.parametrize("log", [False, True])
def test_strided_src_dim_forms_and_plan(monkeypatch, log):
    g = torch.Generator().manual_seed(5)
    base = torch.randn(200, 40, generator=g, dtype=torch.float64)
    src = base[:, ::2]  # not contiguous
    index = torch.randint(0, 30, (200,), generator=g, dtype=torch.int32)
    fn = ts.scatter_log_softmax if log else ts.scatter_softmax
    want = _reference(src, index.long(), log)
    for dim in (0, -2):
        assert torch.allclose(fn(src, index, dim=dim), want, rtol=1e-12, atol=1e-12)
    plan = scatterx.IndexPlan(index, 30)
    assert torch.allclose(fn(src, plan, dim=0), want, rtol=1e-12, atol=1e-12)
    assert torch.allclose(fn(src, plan, dim=0, dim_size=30), want, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="dim 0"):
        fn(src, plan, dim=1)
    with pytest.raises(ValueError, match="dim_size"):
        fn(src, plan, dim=0, dim_size=31)
    # a 1-d src with the default dim=-1 is a row per position as well
    v = torch.randn(200, generator=g, dtype=torch.float64)
    assert torch.allclose(fn(v, index), _reference(v, index.long(), log), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("log", [False, True])
def test_gradcheck_through_the_fused_path(monkeypatch, log):
    g = torch.Generator().manual_seed(11)
    src = torch.randn(40, 3, generator=g, dtype=torch.float64, requires_grad=True)
    index = torch.randint(0, 9, (40,), generator=g)
    fn = ts.scatter_log_softmax if log else ts.scatter_softmax
    spy = []
    monkeypatch.setattr(scatterx._C, "scatter_softmax", _calls(spy))
    assert torch.autograd.gradcheck(lambda s: fn(s, index, dim=0, dim_size=10), (src,))
    assert spy
    plan = scatterx.IndexPlan(index, 10)
    assert torch.autograd.gradcheck(lambda s: fn(s, plan, dim=0), (src,))
    # the same gradient as the composite's
    weights = torch.randn(40, 3, generator=g, dtype=torch.float64)
    (fused,) = torch.autograd.grad((fn(src, index, dim=0) * weights).sum(), src)
    monkeypatch.undo()
    _composite_only(monkeypatch)
    (composite,) = torch.autograd.grad((fn(src, index, dim=0) * weights).sum(), src)
    assert torch.allclose(fused, composite, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_fused_backward_on_the_cpu(monkeypatch, log, dtype):
    """The CPU backward is one kernel call: the composite's gradient within the dtype's rounding, for an expanded
    (stride 0) gradient and a hub of several 512-row chunks too; a double backward records torch ops instead."""
    g = torch.Generator().manual_seed(13)
    index = torch.randint(0, 50, (3000,), generator=g)
    index[::2] = 4  # a hub of 1500 rows
    src = (torch.randn(3000, 20, generator=g) * 3).to(dtype).requires_grad_(True)
    fn = ts.scatter_log_softmax if log else ts.scatter_softmax
    weights = torch.randn(3000, 20, generator=g).to(dtype)
    spy = []
    original = scatterx._C.scatter_softmax_backward

    def wrapped(*args):
        spy.append(args)
        return original(*args)

    monkeypatch.setattr(scatterx._C, "scatter_softmax_backward", wrapped)
    (fused,) = torch.autograd.grad((fn(src, index, dim=0) * weights).sum(), src)
    (fused_ones,) = torch.autograd.grad(fn(src, index, dim=0).sum(), src)  # grad = ones expanded: stride 0
    assert len(spy) == 2
    monkeypatch.undo()
    _composite_only(monkeypatch)
    x = src.detach().double().requires_grad_(True)
    (want,) = torch.autograd.grad((fn(x, index, dim=0) * weights.double()).sum(), x)
    (want_ones,) = torch.autograd.grad(fn(x, index, dim=0).sum(), x)
    rtol, atol = TOL[dtype]
    assert fused.dtype == dtype
    assert torch.allclose(fused.double(), want, rtol=rtol * 4, atol=atol * 40)
    assert torch.allclose(fused_ones.double(), want_ones, rtol=rtol * 4, atol=atol * 40)


def test_double_backward_through_the_fused_path():
    g = torch.Generator().manual_seed(17)
    src = torch.randn(30, 2, generator=g, dtype=torch.float64, requires_grad=True)
    index = torch.randint(0, 5, (30,), generator=g)
    for fn in (ts.scatter_softmax, ts.scatter_log_softmax):
        assert torch.autograd.gradgradcheck(lambda s, f=fn: f(s, index, dim=0, dim_size=6), (src,))


def test_composite_keeps_the_other_cases(monkeypatch):
    spy = []
    monkeypatch.setattr(scatterx._C, "scatter_softmax", _calls(spy))
    g = torch.Generator().manual_seed(2)
    src = torch.randn(6, 5, generator=g)
    index_cols = torch.tensor([0, 1, 0, 2, 1])
    out = ts.scatter_softmax(src, index_cols, dim=1)  # along dim 1: the composite
    want = torch.stack([_reference(src[r], index_cols, False) for r in range(6)]).float()
    assert torch.allclose(out, want, rtol=1e-5, atol=1e-6)
    index2d = torch.randint(0, 3, (6, 5), generator=g)  # a 2-d index: the composite
    ts.scatter_log_softmax(src, index2d, dim=0)
    ts.scatter_softmax(src, torch.tensor([0]), dim=0)  # a broadcast (length-1) index: the composite
    assert not spy


_SAME_BITS_SCRIPT = """
import hashlib, sys, torch
import scatterx.torch_scatter as ts
g = torch.Generator().manual_seed(17)
index = torch.randint(0, 400, (6000,), generator=g)
index[::3] = 5  # a hub of 2000 rows: chunks of 512, spread over the threads
digest = hashlib.sha256()
for dtype in (torch.float32, torch.float64, torch.bfloat16):
    src = (torch.randn(6000, 70, generator=g) * 5).to(dtype)
    for fn in (ts.scatter_softmax, ts.scatter_log_softmax):
        digest.update(fn(src, index, dim=0, dim_size=400).contiguous().view(torch.uint8).numpy().tobytes())
print(digest.hexdigest())
"""


def test_same_bits_on_every_isa_and_thread_count():
    """The kernel's AVX2 build does the baseline build's operations, and its chunks do not depend on the threads:
    the same bits with SCATTERX_CPU_ISA=baseline and without, on 1 and 3 threads."""
    import os
    import subprocess
    import sys

    def digest(isa, threads):
        env = dict(os.environ, SCATTERX_CPU_ISA=isa, OMP_NUM_THREADS=str(threads))
        run = subprocess.run([sys.executable, "-c", _SAME_BITS_SCRIPT], env=env, capture_output=True, text=True,
                             timeout=300)
        assert run.returncode == 0, run.stderr
        return run.stdout.strip()

    runs = {(isa, threads): digest(isa, threads) for isa in ("auto", "baseline") for threads in (1, 3)}
    assert len(set(runs.values())) == 1, runs
