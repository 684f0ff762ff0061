"""scatterx.IndexPlan: the same results as the index it was built from (bit for bit), through
gather_scatter and torch_scatter.scatter, with gradients; reuse, independence from later changes to the
index, and the errors."""

import numpy as np
import pytest

import scatterx

from conftest import import_torch


def _graph(seed, nodes=50, edges=400, features=6):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((nodes, features))
    src = rng.integers(0, nodes, edges)
    dst = rng.integers(0, nodes - 5, edges)  # the last 5 nodes receive nothing
    w = rng.standard_normal(edges)
    return x, src, dst, w


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("weighted", [False, True])
def test_gather_scatter_with_a_plan_is_bit_identical_numpy(reduce, weighted):
    x, src, dst, w = _graph(1)
    for dim_size in (None, 60):
        plan = scatterx.IndexPlan(dst, dim_size)
        kw = dict(edge_weight=w if weighted else None)
        want = scatterx.gather_scatter(x, src, dst, reduce, dim_size=dim_size, **kw)
        for _ in range(2):  # the plan is reused
            got = scatterx.gather_scatter(x, src, plan, reduce, **kw)
            assert got.shape == want.shape and np.array_equal(got, want)


def test_plan_holds_its_own_grouping():
    x, src, dst, _ = _graph(2)
    want = scatterx.gather_scatter(x, src, dst, "sum")
    dst_copy = dst.copy()
    plan = scatterx.IndexPlan(dst_copy)
    dst_copy[:] = 0  # later changes to the index do not reach the plan
    assert np.array_equal(scatterx.gather_scatter(x, src, plan, "sum"), want)
    assert len(plan) == len(dst) and plan.dim_size == dst.max() + 1
    assert np.array_equal(plan.counts(), np.bincount(dst, minlength=plan.dim_size))


def test_plan_errors():
    dst = np.array([0, 3, 1])
    with pytest.raises(IndexError, match=r"IndexPlan: .*index.*3"):
        scatterx.IndexPlan(dst, 3)
    with pytest.raises(ValueError, match="IndexPlan: expected index to be 1-d"):
        scatterx.IndexPlan(np.zeros((2, 2), dtype=np.int64))
    plan = scatterx.IndexPlan(dst, 4)
    x = np.zeros((5, 2))
    with pytest.raises(ValueError, match=r"gather_scatter: expected src_index of length 3 .*got 2"):
        scatterx.gather_scatter(x, np.array([0, 1]), plan)
    with pytest.raises(ValueError, match=r"gather_scatter: expected dim_size to be None or the plan's dim_size \(4\)"):
        scatterx.gather_scatter(x, np.array([0, 1, 2]), plan, dim_size=7)


@pytest.mark.parametrize("reduce", ["sum", "mean", "min", "max", "mul"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "int64"])
def test_torch_scatter_with_a_plan_is_bit_identical(reduce, dtype):
    torch = import_torch()
    import scatterx.torch_scatter as ts
    g = torch.Generator().manual_seed(3)
    src = (torch.randn(300, 4, 3, generator=g) * 5).to(getattr(torch, dtype))
    index = torch.randint(0, 40, (300,), generator=g)
    plan = scatterx.IndexPlan(index, 45)
    want = ts.scatter(src, index, 0, dim_size=45, reduce=reduce)
    got = ts.scatter(src, plan, 0, reduce=reduce)
    assert got.dtype == want.dtype and torch.equal(got, want)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_torch_scatter_with_a_plan_has_the_index_gradients(reduce):
    torch = import_torch()
    import scatterx.torch_scatter as ts
    g = torch.Generator().manual_seed(4)
    src = torch.randn(200, 5, generator=g, dtype=torch.float64, requires_grad=True)
    index = torch.randint(0, 30, (200,), generator=g)
    plan = scatterx.IndexPlan(index, 33)
    weight = torch.randn(33, 5, generator=g, dtype=torch.float64)
    (ts.scatter(src, plan, 0, reduce=reduce) * weight).sum().backward()
    got = src.grad.clone()
    src.grad = None
    (ts.scatter(src, index, 0, dim_size=33, reduce=reduce) * weight).sum().backward()
    assert torch.equal(got, src.grad)
    if reduce != "max":  # against finite differences, on a small plan
        small = scatterx.IndexPlan(index[:20], 33)
        leaf = torch.randn(20, 3, generator=g, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(lambda s: ts.scatter(s, small, 0, reduce=reduce), (leaf,))


def test_gather_scatter_with_a_plan_has_the_index_gradients():
    torch = import_torch()
    x, src, dst, w = (torch.from_numpy(a) for a in _graph(5))
    x.requires_grad_()
    w.requires_grad_()
    plan = scatterx.IndexPlan(dst, 50)
    for reduce in ("sum", "mean"):
        scatterx.gather_scatter(x, src, plan, reduce, edge_weight=w).square().sum().backward()
        got = (x.grad.clone(), w.grad.clone())
        x.grad = w.grad = None
        scatterx.gather_scatter(x, src, dst, reduce, edge_weight=w, dim_size=50).square().sum().backward()
        assert torch.equal(got[0], x.grad) and torch.equal(got[1], w.grad)
        x.grad = w.grad = None
