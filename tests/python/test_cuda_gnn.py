"""The graph-network ops on CUDA tensors: scatterx.gather_scatter, IndexPlan, gather_dot, their gradients,
scatterx.torch_scatter (the fused scatter_rows, scatter_by_plan and scatter_softmax paths included) and PyG with scatterx in
torch_scatter's place.

Every CUDA result is compared with the same call on CPU copies of the inputs (the CPU paths are checked against
torch and numpy in the other files), and where there is one with torch's own CUDA op. Results that the kernels
fold in position order (sum / mean / amax / amin over float32 / float64 without edge weights) must equal the
CPU's bit for bit; the rest (edge weights, 16-bit floats, softmax, the atomic scatter paths) within rounding.

Runs where the package was built with the CUDA backend and a GPU is visible (test_cuda.gpu_torch); elsewhere
every GPU test skips and says why. The tests named *_everywhere need no GPU.
"""

import importlib.util

import numpy as np
import pytest

import scatterx

from conftest import import_torch
from test_cuda import gpu_torch

REDUCES = ["sum", "mean", "amax", "amin"]
FLOATS = ["float32", "float64", "float16", "bfloat16"]
# (src_index dtype, dst_index dtype)
INDEX_DTYPES = [("int64", "int64"), ("int32", "int32"), ("int32", "int64")]
# rtol, atol of a CUDA result against the CPU's where the two may round differently (fused multiply-adds,
# atomics, exp); 16-bit results are also checked against a float64 reference.
TOL = {"float32": (1e-6, 1e-5), "float64": (1e-12, 1e-12), "float16": (1e-2, 1e-2), "bfloat16": (1e-2, 2e-2)}


def _dt(torch, name):
    return getattr(torch, name)


def _close(torch, got, want, dtype_name, msg=""):
    rtol, atol = TOL[dtype_name]
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol, msg=lambda m: f"{msg}: {m}" if msg else m)


def _on_cuda(torch, got, like=None):
    assert isinstance(got, torch.Tensor) and got.is_cuda, f"expected a CUDA tensor, got {type(got)} {got.device}"
    if like is not None:
        assert got.device == like.device and got.dtype == like.dtype, (got.device, got.dtype, like.dtype)
    return got


def _graph(torch, seed, nodes, edges, receivers, feature_shape, dtype, index_dtypes=("int64", "int64")):
    """CPU tensors: x [nodes, *feature_shape], src/dst indices (dst below `receivers`), edge weights."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((nodes,) + tuple(feature_shape), generator=g, dtype=torch.float64).to(_dt(torch, dtype))
    src = torch.randint(0, nodes, (edges,), generator=g).to(_dt(torch, index_dtypes[0]))
    dst = torch.randint(0, max(receivers, 1), (edges,), generator=g).to(_dt(torch, index_dtypes[1]))
    w = torch.randn(edges, generator=g, dtype=torch.float64).to(_dt(torch, dtype))
    return x, src, dst, w


# ---- scatterx.gather_scatter --------------------------------------------------------------------------------


@pytest.mark.parametrize("index_dtypes", INDEX_DTYPES, ids=["-".join(p) for p in INDEX_DTYPES])
@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "weighted"])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduce", REDUCES)
def test_gather_scatter_matches_cpu(reduce, dtype, weighted, index_dtypes):
    torch = gpu_torch()
    exact = dtype in ("float32", "float64") and not weighted
    for case, (feature_shape, edges, dim_size) in enumerate([
            ((1,), 400, None), ((7,), 400, 45), ((64,), 400, None), ((4, 5), 400, 45),
            ((7,), 0, None), ((7,), 0, 5), ((3,), 1, None)]):
        x, src, dst, w = _graph(torch, 100 + case, 50, edges, 40, feature_shape, dtype, index_dtypes)
        weight = w if weighted else None
        want = scatterx.gather_scatter(x, src, dst, reduce, edge_weight=weight, dim_size=dim_size)
        xc, srcc, dstc = x.cuda(), src.cuda(), dst.cuda()
        wc = None if weight is None else weight.cuda()
        got = _on_cuda(torch, scatterx.gather_scatter(xc, srcc, dstc, reduce, edge_weight=wc, dim_size=dim_size), xc)
        rows = dim_size if dim_size is not None else (int(dst.max()) + 1 if edges else 0)
        assert got.shape == (rows,) + tuple(feature_shape) == want.shape
        label = f"{reduce} {dtype} weighted={weighted} x{list(x.shape)} E={edges} dim_size={dim_size}"
        if exact:
            assert torch.equal(got.cpu(), want), f"{label}: max diff {(got.cpu() - want).abs().max()}"
        else:
            _close(torch, got.cpu(), want, dtype, label)
        if dtype in ("float16", "bfloat16"):  # against the sums in float64, rounded once
            ref = scatterx.gather_scatter(x.double(), src, dst, reduce,
                                          edge_weight=None if weight is None else weight.double(), dim_size=dim_size)
            _close(torch, got.cpu().double(), ref, dtype, label + " vs float64")
        if dim_size is not None and edges:
            assert torch.count_nonzero(got[int(dst.max()) + 1:]) == 0, f"{label}: rows no edge reaches are not 0"
        # The same call again (deterministic), and through a CUDA IndexPlan (the same grouping, bit for bit).
        again = scatterx.gather_scatter(xc, srcc, dstc, reduce, edge_weight=wc, dim_size=dim_size)
        assert torch.equal(again, got), f"{label}: not deterministic"
        plan = scatterx.IndexPlan(dstc, dim_size)
        assert plan.device == xc.device
        planned = _on_cuda(torch, scatterx.gather_scatter(xc, srcc, plan, reduce, edge_weight=wc), xc)
        assert torch.equal(planned, got), f"{label}: the plan's result differs from the index's"


def test_gather_scatter_matches_torch_on_cuda():
    """Against torch's own CUDA ops: index_select + index_add_ (sum) and scatter_reduce_ (mean, amax, amin)."""
    torch = gpu_torch()
    x, src, dst, w = (t.cuda() for t in _graph(torch, 7, 300, 5000, 280, (16,), "float64"))
    messages = x.index_select(0, src) * w[:, None]
    for reduce in REDUCES:
        got = scatterx.gather_scatter(x, src, dst, reduce, edge_weight=w, dim_size=300)
        if reduce == "sum":
            want = torch.zeros(300, 16, dtype=x.dtype, device="cuda").index_add_(0, dst, messages)
        else:
            want = torch.zeros(300, 16, dtype=x.dtype, device="cuda").scatter_reduce_(
                0, dst[:, None].expand(-1, 16), messages, reduce, include_self=False)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12, msg=lambda m: f"{reduce}: {m}")


def test_gather_scatter_on_the_callers_stream():
    torch = gpu_torch()
    x, src, dst, w = _graph(torch, 8, 2000, 50000, 1900, (32,), "float32")
    want = scatterx.gather_scatter(x, src, dst, "mean", edge_weight=w, dim_size=2000)
    xc, srcc, dstc, wc = x.cuda(), src.cuda(), dst.cuda(), w.cuda()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        plan = scatterx.IndexPlan(dstc, 2000)
        got = scatterx.gather_scatter(xc, srcc, plan, "mean", edge_weight=wc)
        counts = plan.counts()
    stream.synchronize()
    _close(torch, got.cpu(), want, "float32")
    assert torch.equal(counts.cpu(), torch.bincount(dst, minlength=2000))


# ---- IndexPlan ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_index_plan_on_cuda(index_dtype):
    torch = gpu_torch()
    g = torch.Generator().manual_seed(9)
    index = torch.randint(0, 30, (5000,), generator=g).to(_dt(torch, index_dtype))
    index[0] = 29  # the maximum is there
    cuda_index = index.cuda()
    plan = scatterx.IndexPlan(cuda_index)
    assert plan.device == cuda_index.device and plan.dim_size == 30 and len(plan) == 5000
    counts = _on_cuda(torch, plan.counts())
    assert counts.dtype == torch.int64 and counts.device == cuda_index.device
    assert torch.equal(counts, torch.bincount(cuda_index.long(), minlength=30))
    wider = scatterx.IndexPlan(cuda_index, 40)
    assert wider.dim_size == 40 and len(wider) == 5000
    assert torch.equal(wider.counts().cpu(), torch.bincount(index.long(), minlength=40))
    cuda_index.zero_()  # the plan holds its own grouping
    assert torch.equal(plan.counts().cpu(), torch.bincount(index.long(), minlength=30))
    pairs = torch.stack([index, index], 1).cuda()
    strided = scatterx.IndexPlan(pairs[:, 1])  # a non-contiguous index (stride 2)
    assert not pairs[:, 1].is_contiguous()
    assert torch.equal(strided.counts().cpu(), torch.bincount(index.long(), minlength=30))
    empty = scatterx.IndexPlan(torch.empty(0, dtype=_dt(torch, index_dtype), device="cuda"))
    assert empty.dim_size == 0 and len(empty) == 0 and empty.counts().shape == (0,)
    empty5 = scatterx.IndexPlan(torch.empty(0, dtype=_dt(torch, index_dtype), device="cuda"), 5)
    assert empty5.dim_size == 5 and torch.equal(empty5.counts().cpu(), torch.zeros(5, dtype=torch.int64))


def test_index_plan_errors_on_cuda():
    torch = gpu_torch()
    # The messages of the CPU check (test_index_plan.py), naming the value and its position.
    with pytest.raises(IndexError, match=r"IndexPlan: index 3 is out of bounds for dimension 0 with size 3 "
                                         r"\(index position \[1\]\)"):
        scatterx.IndexPlan(torch.tensor([0, 3, 1], device="cuda"), 3)
    with pytest.raises(IndexError, match=r"IndexPlan: index -2 is out of bounds .*\(index position \[2\]\)"):
        scatterx.IndexPlan(torch.tensor([0, 1, -2], device="cuda", dtype=torch.int32), 3)
    with pytest.raises(IndexError, match=r"IndexPlan: .*-2.* position \[1\]"):
        scatterx.IndexPlan(torch.tensor([0, -2, 1], device="cuda"))
    with pytest.raises(ValueError, match="IndexPlan: expected index to be 1-d"):
        scatterx.IndexPlan(torch.zeros(2, 2, dtype=torch.int64, device="cuda"))
    with pytest.raises(TypeError, match="IndexPlan"):
        scatterx.IndexPlan(torch.zeros(2, device="cuda"))
    # The GPU stays usable after each error.
    assert scatterx.IndexPlan(torch.tensor([0, 2, 1], device="cuda"), 3).counts().tolist() == [1, 1, 1]


def test_plan_on_another_device_is_refused():
    torch = gpu_torch()
    import scatterx.torch_scatter as ts

    x, src, dst, _ = _graph(torch, 10, 20, 60, 15, (3,), "float32")
    cuda_plan = scatterx.IndexPlan(dst.cuda(), 15)
    cpu_plan = scatterx.IndexPlan(dst, 15)
    with pytest.raises(ValueError, match=r"gather_scatter: .*plan on cuda:0"):
        scatterx.gather_scatter(x, src, cuda_plan)
    with pytest.raises(ValueError, match=r"gather_scatter: .*plan on cpu"):
        scatterx.gather_scatter(x.cuda(), src.cuda(), cpu_plan)
    rows = torch.randn(60, 3)
    with pytest.raises(ValueError, match=r"plan on cuda:0"):
        ts.scatter(rows, cuda_plan, 0, reduce="sum")
    with pytest.raises(ValueError, match=r"plan on cpu"):
        ts.scatter(rows.cuda(), cpu_plan, 0, reduce="mean")
    with pytest.raises(ValueError, match=r"plan on cuda:0"):
        ts.scatter_softmax(rows, cuda_plan, 0)
    with pytest.raises(ValueError, match=r"plan on cpu"):
        ts.scatter_log_softmax(rows.cuda(), cpu_plan, 0)


# ---- scatterx.torch.gather_scatter: gradients ---------------------------------------------------------------


def _grads(torch, x, src, dst, w, reduce, dim_size, seed):
    x = x.detach().requires_grad_(True)
    w = w.detach().requires_grad_(True)
    out = scatterx.gather_scatter(x, src, dst, reduce, edge_weight=w, dim_size=dim_size)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=out.dtype).to(out.device)
    gx, gw = torch.autograd.grad(out, (x, w), g)
    return out, gx, gw


@pytest.mark.parametrize("planned", [False, True], ids=["index", "plan"])
@pytest.mark.parametrize("reduce", REDUCES)
def test_gather_scatter_gradients_match_cpu(reduce, planned):
    torch = gpu_torch()
    import scatterx.torch as sxt

    x, src, dst, w = _graph(torch, 11, 60, 500, 50, (6,), "float64")
    cpu = _grads(torch, x, src, dst, w, reduce, 55, 1)
    dst_c = scatterx.IndexPlan(dst.cuda(), 55) if planned else dst.cuda()
    cuda = _grads(torch, x.cuda(), src.cuda(), dst_c, w.cuda(), reduce, None if planned else 55, 1)
    for name, c, g in zip(("out", "grad x", "grad edge_weight"), cpu, cuda):
        assert _on_cuda(torch, g).dtype == torch.float64
        torch.testing.assert_close(g.cpu(), c, rtol=1e-12, atol=1e-12, msg=lambda m: f"{reduce} {name}: {m}")
    # Only x requires grad: the edge_weight gradient is not computed.
    xc = x.cuda().requires_grad_(True)
    out = sxt.gather_scatter(xc, src.cuda(), dst_c, reduce, edge_weight=w.cuda(), dim_size=None if planned else 55)
    (gx,) = torch.autograd.grad(out.sum(), (xc,))
    assert gx.is_cuda and gx.shape == x.shape


@pytest.mark.parametrize("planned", [False, True], ids=["index", "plan"])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_gather_scatter_gradcheck_on_cuda(reduce, planned):
    torch = gpu_torch()
    import scatterx.torch as sxt

    g = torch.Generator().manual_seed(12)
    x = torch.randn(6, 3, generator=g, dtype=torch.float64).cuda().requires_grad_(True)
    w = torch.randn(15, generator=g, dtype=torch.float64).cuda().requires_grad_(True)
    src = torch.randint(0, 6, (15,), generator=g).cuda()
    dst = torch.randint(0, 5, (15,), generator=g).cuda()
    target = scatterx.IndexPlan(dst, 7) if planned else dst
    dim_size = None if planned else 7
    assert torch.autograd.gradcheck(
        lambda x, w: sxt.gather_scatter(x, src, target, reduce, edge_weight=w, dim_size=dim_size), (x, w),
        eps=1e-6, atol=1e-5)


# ---- gather_dot -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("index_dtypes", INDEX_DTYPES, ids=["-".join(p) for p in INDEX_DTYPES])
@pytest.mark.parametrize("dtype", FLOATS)
def test_gather_dot_matches_cpu(dtype, index_dtypes):
    torch = gpu_torch()
    g = torch.Generator().manual_seed(13)
    dt = _dt(torch, dtype)
    for features, edges in ((1, 300), (16, 300), (64, 300), (16, 0)):
        wide = torch.randn(40, 2 * features, generator=g, dtype=torch.float64).to(dt)
        a = wide[:, ::2]  # strided rows
        b = torch.randn(30, features, generator=g, dtype=torch.float64).to(dt)
        ai = torch.randint(0, 40, (edges,), generator=g).to(_dt(torch, index_dtypes[0]))
        bi = torch.randint(0, 30, (edges,), generator=g).to(_dt(torch, index_dtypes[1]))
        want = scatterx.gather_dot(a, ai, b, bi)
        ac = wide.cuda()[:, ::2]
        assert not ac.is_contiguous()
        got = _on_cuda(torch, scatterx.gather_dot(ac, ai.cuda(), b.cuda(), bi.cuda()), b.cuda())
        assert got.shape == (edges,)
        label = f"{dtype} F={features} E={edges}"
        if dtype == "float32":  # up to 64 products folded, each step perhaps fused on the GPU
            torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=5e-5, msg=lambda m: f"{label}: {m}")
        else:
            _close(torch, got.cpu(), want, dtype, label)
        ref = (a.double()[ai.long()] * b.double()[bi.long()]).sum(-1)
        _close(torch, got.cpu().double(), ref, dtype, label + " vs float64")
        assert torch.equal(scatterx.gather_dot(ac, ai.cuda(), b.cuda(), bi.cuda()), got), f"{label}: not deterministic"


def test_gather_dot_errors_on_cuda():
    torch = gpu_torch()
    a = torch.randn(4, 3, device="cuda")
    with pytest.raises(IndexError, match=r"gather_dot.*b_index"):
        scatterx.gather_dot(a, torch.tensor([0, 1], device="cuda"), a, torch.tensor([0, 4], device="cuda"))
    with pytest.raises(ValueError, match="gather_dot"):
        scatterx.gather_dot(a, torch.tensor([0, 1], device="cuda"), a.cpu(), torch.tensor([0, 1]))


# ---- scatterx.torch_scatter ---------------------------------------------------------------------------------

TS_REDUCES = ["sum", "mean", "min", "max", "mul"]
TORCH_REDUCE = {"sum": "sum", "mean": "mean", "min": "amin", "max": "amax", "mul": "prod"}


def _counting(monkeypatch, name):
    """Counts the calls of scatterx._C.<name> that get a CUDA tensor first."""
    calls = []
    original = getattr(scatterx._C, name)

    def wrapped(*args, **kwargs):
        calls.append(bool(getattr(args[0], "is_cuda", False)))
        return original(*args, **kwargs)

    monkeypatch.setattr(scatterx._C, name, wrapped)
    return calls


@pytest.mark.parametrize("form", ["rows", "plan", "columns", "index2d"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("reduce", TS_REDUCES)
def test_torch_scatter_scatter_matches_cpu(monkeypatch, reduce, dtype, form):
    """rows: a 1-d index along dim 0 (the fused scatter_rows path for float32/float64 sum, mean, min, max);
    plan: the same through a CUDA IndexPlan; columns: a 1-d index along the last dim; index2d: an index shaped
    like src."""
    torch = gpu_torch()
    import scatterx.torch_scatter as ts

    g = torch.Generator().manual_seed(14)
    dt = _dt(torch, dtype)
    low, width = (0.9, 0.2) if reduce == "mul" else (-2.0, 4.0)  # products that stay in range
    src = (torch.rand(300, 6, generator=g, dtype=torch.float64) * width + low).to(dt)
    index = torch.randint(0, 40, (300,), generator=g)
    dim = 0
    if form == "columns":
        src = src.t().contiguous()
        dim = -1
    elif form == "index2d":
        index = torch.randint(0, 40, (300, 6), generator=g)
    want = ts.scatter(src, index, dim, dim_size=45, reduce=reduce)
    calls = _counting(monkeypatch, "scatter_by_plan" if form == "plan" else "scatter_rows")
    src_c, index_c = src.cuda(), index.cuda()
    if form == "plan":
        got = ts.scatter(src_c, scatterx.IndexPlan(index_c, 45), 0, reduce=reduce)
    else:
        got = ts.scatter(src_c, index_c, dim, dim_size=45, reduce=reduce)
    _on_cuda(torch, got, src_c)
    assert got.shape == want.shape
    fused = form in ("rows", "plan") and reduce != "mul" and dtype in ("float32", "float64")
    assert calls == ([True] if fused else []), f"scatter_rows / scatter_by_plan calls: {calls}"
    label = f"{reduce} {dtype} {form}"
    if fused or reduce in ("min", "max"):  # a fixed fold order, or no rounding at all
        assert torch.equal(got.cpu(), want), f"{label}: max diff {(got.cpu().double() - want.double()).abs().max()}"
    elif dtype == "bfloat16":  # the GPU's atomic path rounds every bfloat16 add (bfloat162 atomics), the CPU once
        torch.testing.assert_close(got.cpu(), want, rtol=5e-2, atol=1e-1, msg=lambda m: f"{label}: {m}")
    else:
        _close(torch, got.cpu(), want, dtype, label)
    # torch's CUDA op: scatter_reduce_ into zeros (ones for mul) with an index shaped like src
    full = index_c if index_c.dim() == 2 else (index_c[:, None] if dim == 0 else index_c[None, :]).expand_as(src_c)
    shape = (45, 6) if dim == 0 else (6, 45)
    start = (torch.ones if reduce == "mul" else torch.zeros)(shape, dtype=dt, device="cuda")
    theirs = start.scatter_reduce_(dim, full, src_c, TORCH_REDUCE[reduce], include_self=reduce == "mul")
    # torch's 16-bit CUDA sums and products round at every step (scatterx's once): looser there
    rtol, atol = (5e-2, 1e-1) if dtype == "bfloat16" else TOL[dtype]
    torch.testing.assert_close(got.double(), theirs.double(), rtol=rtol, atol=atol,
                               msg=lambda m: f"{label} vs torch: {m}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_torch_scatter_arg_reduces_match_cpu(dtype):
    torch = gpu_torch()
    import scatterx.torch_scatter as ts

    g = torch.Generator().manual_seed(15)
    src = torch.randn(300, 6, generator=g, dtype=torch.float64).to(_dt(torch, dtype))
    index = torch.randint(0, 40, (300,), generator=g)
    for fn in (ts.scatter_max, ts.scatter_min):
        for s, i, dim in ((src, index, 0), (src.t().contiguous(), index, 1)):
            values, arg = fn(s, i, dim, dim_size=45)
            got_values, got_arg = fn(s.cuda(), i.cuda(), dim, dim_size=45)
            _on_cuda(torch, got_values, s.cuda())
            assert got_arg.is_cuda and got_arg.dtype == torch.int64
            assert torch.equal(got_values.cpu(), values) and torch.equal(got_arg.cpu(), arg), fn.__name__
            assert (got_arg.narrow(dim, 40, 5) == s.size(dim)).all()  # empty positions: arg src.size(dim)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "mul"])
@pytest.mark.parametrize("planned", [False, True], ids=["index", "plan"])
def test_torch_scatter_gradients_match_cpu(reduce, planned):
    torch = gpu_torch()
    import scatterx.torch_scatter as ts

    g = torch.Generator().manual_seed(16)
    src = (torch.rand(200, 5, generator=g, dtype=torch.float64) + 0.5)
    index = torch.randint(0, 30, (200,), generator=g)
    weight = torch.randn(33, 5, generator=g, dtype=torch.float64)
    grads = []
    for device in ("cpu", "cuda"):
        s = src.to(device).requires_grad_(True)
        i = index.to(device)
        target = scatterx.IndexPlan(i, 33) if planned else i
        out = ts.scatter(s, target, 0, dim_size=None if planned else 33, reduce=reduce)
        (gs,) = torch.autograd.grad((out * weight.to(device)).sum(), (s,))
        grads.append(gs)
    assert grads[1].is_cuda
    torch.testing.assert_close(grads[1].cpu(), grads[0], rtol=1e-12, atol=1e-12)


SOFTMAX_DTYPES = ["float32", "float64", "float16", "bfloat16"]
# bfloat16: the composite rounds exp and log to bfloat16 on each device; one ulp of a value in [2, 4) is 1/64
SOFTMAX_TOL = {"float64": (1e-12, 1e-12), "float32": (1e-5, 1e-6), "float16": (4e-3, 1e-3),
               "bfloat16": (3e-2, 2e-2)}


@pytest.mark.parametrize("form", ["index", "plan", "composite"])
@pytest.mark.parametrize("dtype", SOFTMAX_DTYPES)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_scatter_softmax_matches_cpu(monkeypatch, log, dtype, form):
    """index / plan: a 1-d index over the rows (the fused kernel on the GPU); composite: along dim 1."""
    torch = gpu_torch()
    import scatterx.torch_scatter as ts

    fn = ts.scatter_log_softmax if log else ts.scatter_softmax
    g = torch.Generator().manual_seed(17)
    for shape in ((300, 7), (300,), (300, 3, 5), (0, 4)):
        src = (torch.randn(shape, generator=g, dtype=torch.float64) * 3).to(_dt(torch, dtype))
        index = torch.randint(0, 40, (shape[0],), generator=g)
        if form == "composite":
            src = src.reshape(shape[0], int(np.prod(shape[1:]))).t().contiguous()  # [F, E], softmax along dim 1
            want = fn(src, index, 1)
        else:
            want = fn(src, index, 0)
        calls = _counting(monkeypatch, "scatter_softmax")
        src_c, index_c = src.cuda(), index.cuda()
        if form == "plan":
            got = fn(src_c, scatterx.IndexPlan(index_c), 0)
        else:
            got = fn(src_c, index_c, 1 if form == "composite" else 0)
        monkeypatch.undo()
        _on_cuda(torch, got, src_c)
        assert calls == ([] if form == "composite" else [True]), f"scatter_softmax calls: {calls}"
        rtol, atol = SOFTMAX_TOL[dtype]
        if form == "composite" and dtype == "float16" and index.numel() > 0:
            # The composite rounds each partial sum of exp to float16, in
            # arrival order on the GPU and index order on the CPU: a group of
            # n values can differ by (n - 1) units of 2^-11 of its sum on each
            # side, relatively in softmax and absolutely in its log.
            n = int(torch.bincount(index).max())
            bound = 2 * (n - 1) * 2.0**-11
            rtol, atol = max(rtol, bound), max(atol, bound)
        torch.testing.assert_close(got.cpu(), want, rtol=rtol, atol=atol,
                                   msg=lambda m: f"{dtype} {form} {list(shape)}: {m}")


@pytest.mark.parametrize("planned", [False, True], ids=["index", "plan"])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_scatter_softmax_gradients_match_cpu(log, planned):
    torch = gpu_torch()
    import scatterx.torch_scatter as ts

    fn = ts.scatter_log_softmax if log else ts.scatter_softmax
    g = torch.Generator().manual_seed(18)
    src = torch.randn(250, 6, generator=g, dtype=torch.float64)
    index = torch.randint(0, 30, (250,), generator=g)
    weight = torch.randn(250, 6, generator=g, dtype=torch.float64)
    grads = []
    for device in ("cpu", "cuda"):
        s = src.to(device).requires_grad_(True)
        i = index.to(device)
        out = fn(s, scatterx.IndexPlan(i) if planned else i, 0)
        (gs,) = torch.autograd.grad((out * weight.to(device)).sum(), (s,))
        grads.append(gs)
    assert grads[1].is_cuda
    torch.testing.assert_close(grads[1].cpu(), grads[0], rtol=1e-10, atol=1e-12)
    small = torch.randn(12, 3, generator=g, dtype=torch.float64).cuda().requires_grad_(True)
    small_index = torch.randint(0, 4, (12,), generator=g).cuda()
    target = scatterx.IndexPlan(small_index) if planned else small_index
    assert torch.autograd.gradcheck(lambda s: fn(s, target, 0), (small,), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_segments_match_cpu(dtype):
    torch = gpu_torch()
    import scatterx.torch_scatter as ts

    g = torch.Generator().manual_seed(19)
    dt = _dt(torch, dtype)
    tol = 1e-5 if dtype == "float32" else 1e-12
    src = torch.randn(100, 6, generator=g, dtype=torch.float64).to(dt)
    indptr = torch.tensor([0, 10, 10, 35, 60, 99, 100])  # an empty segment and a one-row one
    index = torch.repeat_interleave(torch.arange(6), indptr.diff())  # the same segments, as a sorted index
    src_c, indptr_c, index_c = src.cuda(), indptr.cuda(), index.cuda()
    for reduce in ("sum", "mean", "min", "max"):
        for name, fn, arg, arg_c, kw in (("segment_csr", ts.segment_csr, indptr, indptr_c, {}),
                                         ("segment_coo", ts.segment_coo, index, index_c, {"dim_size": 8})):
            want = fn(src, arg, reduce=reduce, **kw)
            got = fn(src_c, arg_c, reduce=reduce, **kw)
            want, got = (want[0], got[0]) if isinstance(want, tuple) else (want, got)
            _on_cuda(torch, got, src_c)
            label = f"{name} {reduce} {dtype}"
            if reduce in ("min", "max"):
                assert torch.equal(got.cpu(), want), label
            else:  # up to 39 rows a segment, perhaps summed in another order on the GPU
                torch.testing.assert_close(got.cpu(), want, rtol=tol, atol=tol, msg=lambda m: f"{label}: {m}")
        # torch's CUDA index_add_ / scatter_reduce_ give the same per-segment sums and extrema
        if reduce in ("sum", "max"):
            size = (6, 6)
            if reduce == "sum":
                theirs = torch.zeros(size, dtype=dt, device="cuda").index_add_(0, index_c, src_c)
            else:
                theirs = torch.zeros(size, dtype=dt, device="cuda").scatter_reduce_(
                    0, index_c[:, None].expand_as(src_c), src_c, "amax", include_self=False)
            torch.testing.assert_close(ts.segment_csr(src_c, indptr_c, reduce=reduce), theirs, rtol=tol, atol=tol)
    per_segment = torch.randn(6, 6, generator=g, dtype=torch.float64).to(dt)
    assert torch.equal(ts.gather_csr(per_segment.cuda(), indptr_c).cpu(), ts.gather_csr(per_segment, indptr))
    assert torch.equal(ts.gather_csr(per_segment.cuda(), indptr_c).cpu(), per_segment[index])
    assert torch.equal(ts.gather_coo(per_segment.cuda(), index_c).cpu(), per_segment[index])
    # gradients of segment_csr on the GPU equal the CPU's
    grads = []
    for device in ("cpu", "cuda"):
        s = src.double().to(device).requires_grad_(True)
        (gs,) = torch.autograd.grad(ts.segment_csr(s, indptr.to(device), reduce="mean").square().sum(), (s,))
        grads.append(gs)
    torch.testing.assert_close(grads[1].cpu(), grads[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_logsumexp_and_std_match_cpu(dtype):
    torch = gpu_torch()
    import scatterx.torch_scatter as ts

    g = torch.Generator().manual_seed(20)
    src = torch.randn(300, 6, generator=g, dtype=torch.float64).to(_dt(torch, dtype))
    index = torch.randint(0, 40, (300,), generator=g)
    tol = (1e-5, 1e-5) if dtype == "float32" else (1e-12, 1e-12)
    for name, call in (
            ("logsumexp", lambda s, i: ts.scatter_logsumexp(s, i, 0, dim_size=45)),
            ("std", lambda s, i: ts.scatter_std(s, i, 0, dim_size=45)),
            ("std biased, dim 1", lambda s, i: ts.scatter_std(s.t(), i, 1, dim_size=45, unbiased=False))):
        want = call(src, index)
        got = _on_cuda(torch, call(src.cuda(), index.cuda()))
        torch.testing.assert_close(got.cpu(), want, rtol=tol[0], atol=tol[1], msg=lambda m: f"{name}: {m}")
        grads = []
        for device in ("cpu", "cuda"):
            s = src.double().to(device).requires_grad_(True)
            (gs,) = torch.autograd.grad(call(s, index.to(device)).sum(), (s,))
            grads.append(gs)
        torch.testing.assert_close(grads[1].cpu(), grads[0], rtol=1e-10, atol=1e-12, msg=lambda m: f"{name}: {m}")


# ---- PyG on CUDA ----------------------------------------------------------------------------------------

# Calls into scatterx.torch_scatter per scenario of test_pyg's script on CUDA (see test_pyg's docstring): PyG
# sends scatter min/max with grad to torch_scatter.scatter on CUDA (SAGEConv max/min on a plain edge_index),
# and segment 'mean' with a 1-d ptr to torch's segment_reduce.
_EXPECTED_CUDA_CALLS = {
    "tensor/gcn": {}, "tensor/sage_mean": {}, "tensor/sage_max": {"scatter": 1}, "tensor/sage_min": {"scatter": 1},
    "tensor/gat": {},
    "edge_index_csc/gcn": {"segment_csr": 1},
    "edge_index_csc/sage_mean": {},
    "edge_index_csc/sage_max": {"segment_csr": 1},
    "edge_index_csc/sage_min": {"segment_csr": 1},
    "edge_index_csc/gat": {"segment_csr": 3},
    "scatter_argmax": {"scatter_max": 1},
}


@pytest.fixture(scope="module")
def pyg_cuda_runs(tmp_path_factory):
    gpu_torch()
    if importlib.util.find_spec("torch_geometric") is None:
        pytest.skip("torch_geometric (PyTorch Geometric) not installed")
    import test_pyg

    tmp = tmp_path_factory.mktemp("pyg_cuda")
    return test_pyg._run("scatterx", tmp, "cuda"), test_pyg._run("torch", tmp, "cuda")


def test_pyg_on_cuda_calls_scatterx(pyg_cuda_runs):
    sx, plain = pyg_cuda_runs
    assert sx["info"] == {"with_torch_scatter": True, "module": "scatterx.torch_scatter"}
    assert plain["info"]["with_torch_scatter"] is False
    assert sorted(sx["results"]) == sorted(_EXPECTED_CUDA_CALLS)
    for scenario, expected in _EXPECTED_CUDA_CALLS.items():
        assert sx["results"][scenario]["calls"] == expected, scenario
        assert plain["results"][scenario]["calls"] == {}, scenario


@pytest.mark.parametrize("scenario", sorted(_EXPECTED_CUDA_CALLS))
def test_pyg_on_cuda_outputs_and_gradients_match(pyg_cuda_runs, scenario):
    """GCNConv, SAGEConv (mean, max, min), GATConv on CUDA: the same outputs and gradients (x and every
    parameter) with scatterx in torch_scatter's place as without. torch's CUDA sums use atomics, so floats
    match within rounding; the argmax exactly."""
    torch = import_torch()
    sx, plain = pyg_cuda_runs[0]["results"][scenario], pyg_cuda_runs[1]["results"][scenario]
    keys = sorted(k for k in plain if k != "calls")
    assert sorted(k for k in sx if k != "calls") == keys and keys
    for key in keys:
        a, b = sx[key], plain[key]
        assert a is not None and b is not None, f"{scenario} {key}: no gradient"
        assert a.dtype == (torch.int64 if key == "arg" else torch.float64) and a.shape == b.shape, key
        if key == "arg":
            assert torch.equal(a, b), f"{scenario}: argmax differs"
        else:
            assert torch.allclose(a, b, rtol=1e-10, atol=1e-12), f"{scenario} {key}: max diff {(a - b).abs().max()}"


# ---- without a GPU ----------------------------------------------------------------------------------------


def test_index_plan_device_everywhere():
    torch = import_torch()
    assert scatterx.IndexPlan(np.array([0, 2, 1])).device == "cpu"
    plan = scatterx.IndexPlan(torch.tensor([0, 2, 1]))
    assert plan.device == torch.device("cpu")
    assert torch.equal(plan.counts(), torch.ones(3, dtype=torch.int64))


def test_fused_paths_need_src_and_index_on_one_device_everywhere():
    """The fused torch_scatter paths are chosen by device: src and index on one device, CPU or CUDA (the meta
    device stands in for "another device" here)."""
    torch = import_torch()
    from scatterx.torch_scatter import _composite, _scatter

    src = torch.randn(6, 2)
    index = torch.tensor([0, 1, 0, 2, 1, 0])
    assert _composite._fused_plan("scatter_softmax", src, index, 0, None) is not None
    assert _scatter._by_rows(src, index, 0, None, "sum") is not None
    meta = index.to("meta")
    assert _composite._fused_plan("scatter_softmax", src, meta, 0, None) is None
    assert _scatter._by_rows(src, meta, 0, None, "sum") is None
    assert _composite._fused_plan("scatter_softmax", src.to("meta"), meta, 0, None) is None
    plan = scatterx.IndexPlan(index)
    assert _composite._fused_plan("scatter_softmax", src, plan, 0, None) is plan


def test_backward_helpers_name_a_device_everywhere():
    """Without a GPU: the backward passes of gather_scatter (every reduce, with an index and with a plan) and of
    the fused scatter_softmax / planned scatter make no tensor without naming a device (test_autograd's
    check), so they keep CUDA inputs on the GPU."""
    torch = import_torch()
    import scatterx.torch as sxt
    import scatterx.torch_scatter as ts
    from test_autograd import _FactoryCalls

    x, src, dst, w = _graph(torch, 21, 10, 40, 8, (3,), "float64")
    nodes = []
    for reduce in REDUCES:
        for target in (dst, scatterx.IndexPlan(dst, 9)):
            xs, ws = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
            nodes.append(sxt.gather_scatter(xs, src, target, reduce, edge_weight=ws,
                                            dim_size=None if isinstance(target, scatterx.IndexPlan) else 9))
    rows = torch.randn(40, 3, dtype=torch.float64, requires_grad=True)
    plan = scatterx.IndexPlan(dst)
    for fn in (ts.scatter_softmax, ts.scatter_log_softmax):
        nodes += [fn(rows, dst, 0), fn(rows, plan, 0)]
    nodes += [ts.scatter(rows, plan, 0, reduce=r) for r in ("sum", "mean")]
    for out in nodes:
        calls = _FactoryCalls()
        with calls:  # the engine runs backward outside the mode: call the node's backward here
            out.grad_fn.apply(torch.ones_like(out))
        assert calls.without_device == [], out.grad_fn
