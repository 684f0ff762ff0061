"""scatterx.gather_scatter: the fused message passing, against torch's
index_select + index_add_ / scatter_reduce and a numpy loop, its errors,
and its gradients (gradcheck in float64)."""

import numpy as np
import pytest

import scatterx
from conftest import import_torch


def graph(rng, nodes, edges, features):
    x = rng.standard_normal((nodes, features))
    src = rng.integers(0, nodes, edges)
    dst = rng.integers(0, nodes, edges)
    w = rng.standard_normal(edges)
    return x, src, dst, w


def test_numpy_matches_a_loop():
    rng = np.random.default_rng(1)
    x, src, dst, w = graph(rng, 7, 40, 3)
    out = scatterx.gather_scatter(x, src, dst, "sum", edge_weight=w, dim_size=9)
    want = np.zeros((9, 3))
    for e in range(40):
        want[dst[e]] += x[src[e]] * w[e]
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
    assert scatterx.gather_scatter(x, src, dst).shape == (dst.max() + 1, 3)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("weighted", [False, True])
def test_sum_matches_index_select_index_add(dtype, index_dtype, weighted):
    torch = import_torch()
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(50, 8, dtype=getattr(torch, dtype), generator=gen)
    src = torch.randint(0, 50, (300,), generator=gen).to(getattr(torch, index_dtype))
    dst = torch.randint(0, 40, (300,), generator=gen).to(getattr(torch, index_dtype))
    w = torch.randn(300, dtype=x.dtype, generator=gen) if weighted else None
    out = scatterx.gather_scatter(x, src, dst, edge_weight=w, dim_size=45)
    messages = x.index_select(0, src)
    if weighted:
        messages = messages * w[:, None]
    want = torch.zeros(45, 8, dtype=x.dtype).index_add_(0, dst, messages)
    tol = 1e-5 if dtype == "float32" else 1e-12
    torch.testing.assert_close(out, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("reduce", ["mean", "amax", "amin"])
def test_reduces_match_scatter_reduce(reduce):
    torch = import_torch()
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(20, 5, dtype=torch.float64, generator=gen)
    src = torch.randint(0, 20, (100,), generator=gen)
    dst = torch.randint(0, 30, (100,), generator=gen)
    out = scatterx.gather_scatter(x, src, dst, reduce, dim_size=32)
    messages = x.index_select(0, src)
    want = torch.zeros(32, 5, dtype=x.dtype).scatter_reduce_(0, dst[:, None].expand(-1, 5), messages, reduce,
                                                             include_self=False)
    torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-12)


def test_errors():
    x = np.zeros((4, 2))
    with pytest.raises(IndexError, match="gather_scatter"):
        scatterx.gather_scatter(x, np.array([0, 4]), np.array([0, 1]))
    with pytest.raises(ValueError):
        scatterx.gather_scatter(x, np.array([0, 1]), np.array([0]))
    with pytest.raises(TypeError):
        scatterx.gather_scatter(x, np.array([0, 1]), np.array([0, 1]), edge_weight=np.ones(2, np.float32))


@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
def test_gradcheck(reduce, weighted):
    torch = import_torch()
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(6, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    src = torch.randint(0, 6, (15,), generator=gen)
    dst = torch.randint(0, 7, (15,), generator=gen)
    w = torch.randn(15, dtype=torch.float64, generator=gen, requires_grad=True) if weighted else None

    def f(x, *w):
        return scatterx.gather_scatter(x, src, dst, reduce, edge_weight=w[0] if w else None, dim_size=8)

    assert torch.autograd.gradcheck(f, (x, w) if weighted else (x,))


def test_backward_matches_torch():
    torch = import_torch()
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(10, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    w = torch.randn(30, dtype=torch.float64, generator=gen, requires_grad=True)
    src = torch.randint(0, 10, (30,), generator=gen)
    dst = torch.randint(0, 10, (30,), generator=gen)
    grad = torch.randn(10, 4, dtype=torch.float64, generator=gen)
    (scatterx.gather_scatter(x, src, dst, "mean", edge_weight=w, dim_size=10) * grad).sum().backward()
    gx, gw = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    messages = x.index_select(0, src) * w[:, None]
    want = torch.zeros(10, 4, dtype=x.dtype).scatter_reduce(0, dst[:, None].expand(-1, 4), messages, "mean",
                                                             include_self=False)
    (want * grad).sum().backward()
    torch.testing.assert_close(gx, x.grad)
    torch.testing.assert_close(gw, w.grad)


def test_amax_refuses_grad():
    torch = import_torch()
    x = torch.randn(3, 2, requires_grad=True)
    with pytest.raises(TypeError, match="sum' and 'mean"):
        scatterx.gather_scatter(x, torch.tensor([0, 1]), torch.tensor([0, 0]), "amax")
