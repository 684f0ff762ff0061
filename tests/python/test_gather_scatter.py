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


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
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


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("ties", [False, True])
def test_backward_matches_torch(reduce, ties):
    """Against index_select + scatter_reduce(include_self=False) through torch's autograd; with ties, edges
    repeat (same source, same destination) and some weights are equal, so maxima tie and share the gradient."""
    torch = import_torch()
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(10, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    src = torch.randint(0, 10, (30,), generator=gen)
    dst = torch.randint(0, 12, (30,), generator=gen)
    w = torch.randn(30, dtype=torch.float64, generator=gen)
    if ties:
        src, dst, w = torch.cat([src, src[:10]]), torch.cat([dst, dst[:10]]), torch.cat([w, w[:10]])
    w.requires_grad_(True)
    grad = torch.randn(12, 4, dtype=torch.float64, generator=gen)
    (scatterx.gather_scatter(x, src, dst, reduce, edge_weight=w, dim_size=12) * grad).sum().backward()
    gx, gw = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    messages = x.index_select(0, src) * w[:, None]
    want = torch.zeros(12, 4, dtype=x.dtype).scatter_reduce(0, dst[:, None].expand(-1, 4), messages, reduce,
                                                            include_self=False)
    (want * grad).sum().backward()
    torch.testing.assert_close(gx, x.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gw, w.grad, rtol=1e-12, atol=1e-12)


def test_backward_with_a_plan_and_float32():
    torch = import_torch()
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(40, 16, generator=gen, requires_grad=True)
    w = torch.rand(300, generator=gen, requires_grad=True)
    src = torch.randint(0, 40, (300,), generator=gen)
    dst = torch.randint(0, 50, (300,), generator=gen)
    plan = scatterx.IndexPlan(dst, 50)
    for reduce in ("sum", "amax"):
        scatterx.gather_scatter(x, src, plan, reduce, edge_weight=w).square().sum().backward()
        gx, gw = x.grad, w.grad
        x.grad = w.grad = None
        messages = x.index_select(0, src) * w[:, None]
        want = torch.zeros(50, 16).scatter_reduce(0, dst[:, None].expand(-1, 16), messages, reduce,
                                                  include_self=False)
        want.square().sum().backward()
        torch.testing.assert_close(gx, x.grad, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(gw, w.grad, rtol=1e-5, atol=1e-5)
        x.grad = w.grad = None


def gather_dot_loop(a, ai, b, bi):
    return np.array([np.dot(a[ai[e]].ravel(), b[bi[e]].ravel()) for e in range(len(ai))])


@pytest.mark.parametrize("features", [(1,), (7,), (64,), (3, 5), (0,)])
@pytest.mark.parametrize("index_dtypes", [("int64", "int64"), ("int32", "int64"), ("int32", "int32")])
def test_gather_dot_matches_a_loop(features, index_dtypes):
    rng = np.random.default_rng(8)
    a = rng.standard_normal((9,) + features)
    b = rng.standard_normal((13,) + features)
    ai = rng.integers(0, 9, 50).astype(index_dtypes[0])
    bi = rng.integers(0, 13, 50).astype(index_dtypes[1])
    out = scatterx.gather_dot(a, ai, b, bi)
    assert out.shape == (50,) and out.dtype == np.float64
    np.testing.assert_allclose(out, gather_dot_loop(a, ai, b, bi), rtol=1e-12, atol=1e-12)


def test_gather_dot_strided_empty_and_float32():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((6, 20)).astype(np.float32)[:, ::2]  # strided rows
    b = np.asfortranarray(rng.standard_normal((5, 10)).astype(np.float32))
    ai, bi = rng.integers(0, 6, 33), rng.integers(0, 5, 33)
    np.testing.assert_allclose(scatterx.gather_dot(a, ai, b, bi), gather_dot_loop(a, ai, b, bi), rtol=1e-5)
    assert scatterx.gather_dot(a, ai[:0], b, bi[:0]).shape == (0,)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gather_dot_16_bit_sums_in_float(dtype):
    torch = import_torch()
    gen = torch.Generator().manual_seed(10)
    a = torch.randn(8, 96, generator=gen).to(getattr(torch, dtype))
    b = torch.randn(8, 96, generator=gen).to(getattr(torch, dtype))
    ai, bi = torch.randint(0, 8, (20,), generator=gen), torch.randint(0, 8, (20,), generator=gen)
    out = scatterx.gather_dot(a, ai, b, bi)
    want = (a.float()[ai] * b.float()[bi]).sum(1)
    assert out.dtype == a.dtype
    torch.testing.assert_close(out.float(), want.to(a.dtype).float(), rtol=1e-2, atol=1e-2)


def test_gather_dot_errors():
    a, b = np.zeros((4, 3)), np.zeros((5, 3))
    with pytest.raises(IndexError, match=r"gather_dot.*b_index"):
        scatterx.gather_dot(a, np.array([0, 1]), b, np.array([0, 5]))
    with pytest.raises(ValueError, match=r"gather_dot: expected b_index of length 2"):
        scatterx.gather_dot(a, np.array([0, 1]), b, np.array([0]))
    with pytest.raises(ValueError, match=r"gather_dot: expected a and b to match after dim 0"):
        scatterx.gather_dot(a, np.array([0]), np.zeros((5, 4)), np.array([0]))
    with pytest.raises(TypeError, match=r"gather_dot: expected b"):
        scatterx.gather_dot(a, np.array([0]), b.astype(np.float32), np.array([0]))
    with pytest.raises(TypeError, match=r"gather_dot: expected a of a floating dtype"):
        scatterx.gather_dot(a.astype(np.int64), np.array([0]), b.astype(np.int64), np.array([0]))
