"""scatterx.index_add_weighted(_): index_add with one weight per index entry
(MoE combine), against a numpy loop and torch's two-step equivalent."""

import numpy as np
import pytest

import scatterx
from conftest import import_torch


def reference(self_, dim, index, source, weights):
    out = np.array(self_, copy=True)
    src = np.moveaxis(source, dim, 0)
    dst = np.moveaxis(out, dim, 0)  # a view: writes land in out
    for i, target in enumerate(index.reshape(-1)):
        dst[target] += weights.reshape(-1)[i] * src[i]
    return out


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "complex64"])
def test_matches_a_serial_loop(dtype, dim):
    rng = np.random.default_rng(5)
    shape = [6, 5, 4]
    d = dim % 3
    n = 9
    source_shape = list(shape)
    source_shape[d] = n
    self_ = (rng.integers(-4, 5, shape)).astype(dtype)
    source = (rng.integers(-4, 5, source_shape)).astype(dtype)
    weights = (rng.integers(-3, 4, n)).astype(dtype)
    index = rng.integers(0, shape[d], n)
    expected = reference(self_, d, index, source, weights)
    got = scatterx.index_add_weighted(self_, dim, index, source, weights)
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == self_.dtype
    out = self_.copy()
    assert scatterx.index_add_weighted_(out, dim, index, source, weights) is out
    np.testing.assert_array_equal(out, expected)


def test_strided_weights_and_moe_shapes():
    rng = np.random.default_rng(6)
    tokens, top_k, hidden = 64, 2, 48
    expert_out = rng.standard_normal((tokens * top_k, hidden))
    token_of_row = np.argsort(rng.integers(0, 8, tokens * top_k), kind="stable") // top_k
    probs = rng.random((tokens * top_k, 3))[:, 1]  # a strided view
    got = scatterx.index_add_weighted(np.zeros((tokens, hidden)), 0, token_of_row, expert_out, probs)
    np.testing.assert_allclose(got, reference(np.zeros((tokens, hidden)), 0, token_of_row, expert_out, probs),
                               rtol=1e-12, atol=1e-12)


def test_bad_weights_raise_and_write_nothing():
    self_ = np.zeros((4, 3), dtype=np.float32)
    index = np.array([0, 3])
    source = np.ones((2, 3), dtype=np.float32)
    with pytest.raises(ValueError, match=r"index_add_weighted_: expected weights to be a vector with one weight "
                                         r"per index entry \(2\), got shape \[3\]"):
        scatterx.index_add_weighted_(self_, 0, index, source, np.ones(3, dtype=np.float32))
    with pytest.raises(TypeError, match="index_add_weighted.*weights.*float64"):
        scatterx.index_add_weighted(self_, 0, index, source, np.ones(2))
    with pytest.raises(IndexError, match="index 4 is out of bounds"):
        scatterx.index_add_weighted_(self_, 0, np.array([0, 4]), source, np.ones(2, dtype=np.float32))
    assert not self_.any()


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
def test_matches_torch_index_add_of_weighted_rows(dtype):
    torch = import_torch()
    dt = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(3)
    tokens, rows, hidden = 50, 100, 33
    out = torch.randn(tokens, hidden, generator=gen).to(dt)
    expert_out = torch.randn(rows, hidden, generator=gen).to(dt)
    ids = torch.randint(0, tokens, (rows,), generator=gen)
    probs = torch.rand(rows, generator=gen).to(dt)
    got = scatterx.index_add_weighted(out, 0, ids, expert_out, probs)
    assert isinstance(got, torch.Tensor) and got.dtype == dt
    # torch rounds each product to dtype before adding; scatterx does not.
    expected = out.double().index_add(0, ids, expert_out.double() * probs.double()[:, None])
    tol = {"float64": 1e-12, "float32": 1e-5, "bfloat16": 3e-2}[dtype]
    torch.testing.assert_close(got.double(), expected, rtol=tol, atol=tol)
