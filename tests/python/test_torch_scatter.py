"""scatterx.torch_scatter against torch itself: torch.scatter_reduce, per-segment loops of torch reductions,
repeat_interleave / index_select, and small cases checked by hand (torch_scatter is not installable here)."""

import pytest

from conftest import TORCH_MISSING

torch = pytest.importorskip("torch", reason=TORCH_MISSING)

import scatterx.torch_scatter as ts  # noqa: E402


def _broadcast_index(index, src, dim):
    dim = dim % src.dim()
    shape = [1] * src.dim()
    shape[dim] = -1
    return index.view(shape).expand_as(src)


def _loop_arg(src, index, dim, size, largest):
    """(values, arg) of scatter max/min by plain loops over a 2-d src (dim 0 or 1)."""
    src2 = src if dim == 0 else src.t()
    index2 = index if dim == 0 else index.t()
    out = torch.zeros((size, src2.shape[1]), dtype=src.dtype)
    arg = torch.full((size, src2.shape[1]), src2.shape[0], dtype=torch.long)
    for k in range(src2.shape[1]):
        for e in range(src2.shape[0]):
            n, v = int(index2[e, k]), src2[e, k]
            if arg[n, k] == src2.shape[0] or (v > out[n, k] if largest else v < out[n, k]):
                out[n, k], arg[n, k] = v, e
    return (out, arg) if dim == 0 else (out.t(), arg.t())


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64])
def test_scatter_sum_mean_max_min_match_torch(dim, dtype):
    g = torch.Generator().manual_seed(7)
    src = torch.randint(-9, 10, (6, 5), generator=g).to(dtype)
    n = src.shape[dim]
    index = torch.randint(0, 4, (n,), generator=g)
    index[0] = 5  # positions 4 (and maybe others) stay empty
    full = _broadcast_index(index, src, dim)
    size = list(src.shape)
    size[dim] = 6
    want_sum = torch.zeros(size, dtype=dtype).scatter_add_(dim, full, src)
    assert torch.equal(ts.scatter_sum(src, index, dim), want_sum)
    assert torch.equal(ts.scatter(src, index, dim, reduce="add"), want_sum)
    count = torch.zeros(size, dtype=dtype).scatter_add_(dim, full, torch.ones_like(src)).clamp(min=1)
    want_mean = want_sum / count if dtype.is_floating_point else torch.div(want_sum, count, rounding_mode="floor")
    assert torch.equal(ts.scatter_mean(src, index, dim), want_mean)
    want_mul = torch.ones(size, dtype=dtype).scatter_reduce(dim, full, src, "prod")
    assert torch.equal(ts.scatter_mul(src, index, dim), want_mul)
    for largest, fn in ((True, ts.scatter_max), (False, ts.scatter_min)):
        values, arg = fn(src, index, dim)
        want_values, want_arg = _loop_arg(src, full, dim, 6, largest)
        assert torch.equal(values, want_values) and torch.equal(arg, want_arg)
        reduced = torch.zeros(size, dtype=dtype).scatter_reduce(dim, full, src, "amax" if largest else "amin",
                                                                include_self=False)
        assert torch.equal(values, reduced)


def test_default_dim_dim_size_and_empty_positions():
    src = torch.tensor([[1.0, 5.0, 2.0, 4.0]])
    index = torch.tensor([0, 2, 0, 2])
    assert torch.equal(ts.scatter(src, index), torch.tensor([[3.0, 0.0, 9.0]]))  # dim=-1
    assert torch.equal(ts.scatter(src, index, dim_size=5), torch.tensor([[3.0, 0.0, 9.0, 0.0, 0.0]]))
    values, arg = ts.scatter_max(src, index, dim_size=4)
    assert torch.equal(values, torch.tensor([[2.0, 0.0, 5.0, 0.0]]))
    assert torch.equal(arg, torch.tensor([[2, 4, 1, 4]]))  # empty: src.size(dim)
    values, arg = ts.scatter_min(src, index)
    assert torch.equal(values, torch.tensor([[1.0, 0.0, 4.0]])) and torch.equal(arg, torch.tensor([[0, 4, 3]]))
    assert torch.equal(ts.scatter(src, index, reduce="mul"), torch.tensor([[2.0, 1.0, 20.0]]))


def test_index_broadcast_over_trailing_dims():
    src = torch.arange(24.0).view(2, 4, 3)
    index = torch.tensor([1, 0, 1, 1])
    out = ts.scatter(src, index, dim=1, reduce="sum")
    want = torch.stack([src[:, 1], src[:, 0] + src[:, 2] + src[:, 3]], dim=1)
    assert torch.equal(out, want)
    two_d = ts.scatter(src[0], torch.tensor([[1], [0], [1], [1]]), dim=0)  # [4, 1] index broadcast to [4, 3]
    assert torch.equal(two_d, want[0])


def test_out_semantics():
    src = torch.tensor([1.0, 2.0, 3.0, 4.0])
    index = torch.tensor([0, 0, 2, 2])
    out = torch.tensor([10.0, 20.0, 30.0])
    result = ts.scatter_sum(src, index, out=out)
    assert result is out and torch.equal(out, torch.tensor([13.0, 20.0, 37.0]))
    out = torch.tensor([10.0, 20.0, 30.0])
    ts.scatter_mean(src, index, out=out)  # (out + sum) / count of src values; count clamped to 1
    assert torch.equal(out, torch.tensor([13.0 / 2, 20.0, 37.0 / 2]))
    out = torch.tensor([1.5, 7.0, 9.0])
    values, arg = ts.scatter_max(src, index, out=out)
    assert values is out and torch.equal(out, torch.tensor([2.0, 7.0, 9.0])) and torch.equal(arg, torch.tensor([1, 4, 4]))
    out = torch.full((3,), -1.0)
    assert ts.segment_csr(src, torch.tensor([0, 2, 2, 4]), out=out) is out
    assert torch.equal(out, torch.tensor([3.0, 0.0, 7.0]))
    out = torch.full((4,), 9.0)
    ts.gather_csr(torch.tensor([5.0, 6.0]), torch.tensor([1, 2, 3]), out=out)
    assert torch.equal(out, torch.tensor([9.0, 5.0, 6.0, 9.0]))  # positions no segment covers keep out's value
    out = torch.tensor([1.0, 1.0, 1.0])
    ts.segment_coo(src, index, out=out, reduce="sum")
    assert torch.equal(out, torch.tensor([4.0, 1.0, 8.0]))


def _segment_loop(src, indptr, reduce):
    dim = indptr.dim() - 1  # one indptr row shared by every leading row
    ptr = indptr.reshape(-1)
    rows = []
    for n in range(ptr.numel() - 1):
        part = src.narrow(dim, int(ptr[n]), int(ptr[n + 1] - ptr[n]))
        if part.shape[dim] == 0:
            rows.append(torch.zeros_like(src.select(dim, 0)))
        elif reduce == "mean":
            rows.append(part.sum(dim) / part.shape[dim])
        else:
            rows.append(getattr(part, {"sum": "sum", "max": "amax", "min": "amin"}[reduce])(dim))
    return torch.stack(rows, dim)


@pytest.mark.parametrize("reduce", ["sum", "mean", "min", "max"])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_segment_csr_and_coo_match_loops(reduce, index_dtype):
    g = torch.Generator().manual_seed(3)
    src = torch.randn(2, 9, 4, generator=g, dtype=torch.float64)
    indptr = torch.tensor([0, 2, 2, 5, 9, 9])  # empty segments at 1 and 4
    want = _segment_loop(src, indptr.unsqueeze(0), reduce)
    assert torch.allclose(ts.segment_csr(src, indptr.unsqueeze(0).to(index_dtype), reduce=reduce), want)
    index = torch.repeat_interleave(torch.arange(5), indptr.diff()).unsqueeze(0).to(index_dtype)
    assert torch.allclose(ts.segment_coo(src, index, reduce=reduce), want[:, :4])
    assert torch.allclose(ts.segment_coo(src, index, dim_size=5, reduce=reduce), want)
    if reduce in ("min", "max"):
        values, arg = getattr(ts, f"segment_{reduce}_csr")(src, indptr.unsqueeze(0))
        assert torch.equal(arg[:, 1], torch.full((2, 4), 9)) and torch.equal(values[:, 1], torch.zeros(2, 4))
        picked = torch.gather(src, 1, arg[:, [0, 2, 3]])
        assert torch.equal(picked, values[:, [0, 2, 3]])


def test_gathers_match_torch():
    src = torch.randn(3, 4)
    indptr = torch.tensor([0, 2, 2, 5])
    assert torch.equal(ts.gather_csr(src, indptr), torch.repeat_interleave(src, indptr.diff(), dim=0))
    index = torch.tensor([0, 0, 2, 2, 2])
    assert torch.equal(ts.gather_coo(src, index), src.index_select(0, index))
    batched = torch.tensor([[0, 1, 1], [2, 2, 2]])  # one index row per leading row: dim 1
    src2 = torch.randn(2, 3, 4)
    want = torch.stack([src2[0].index_select(0, batched[0]), src2[1].index_select(0, batched[1])])
    assert torch.equal(ts.gather_coo(src2, batched), want)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_and_bfloat16(dtype):
    src = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=dtype)
    index = torch.tensor([0, 1, 0, 1, 1])
    assert ts.scatter_sum(src, index).dtype == dtype
    assert torch.equal(ts.scatter_sum(src, index), torch.tensor([4.0, 11.0], dtype=dtype))
    assert torch.equal(ts.scatter_mean(src, index), torch.tensor([2.0, 11.0 / 3], dtype=dtype))
    assert torch.equal(ts.scatter_max(src, index)[0], torch.tensor([3.0, 5.0], dtype=dtype))
    assert torch.equal(ts.segment_csr(src, torch.tensor([0, 2, 5]), reduce="mean"), torch.tensor([1.5, 4.0], dtype=dtype))
    soft = ts.scatter_softmax(src, index)
    assert soft.dtype == dtype


def test_zero_size():
    src = torch.zeros(0, 3)
    index = torch.zeros(0, dtype=torch.long)
    assert ts.scatter(src, index, dim=0).shape == (0, 3)
    assert torch.equal(ts.scatter(src, index, dim=0, dim_size=2), torch.zeros(2, 3))
    values, arg = ts.scatter_max(src, index, dim=0, dim_size=2)
    assert torch.equal(values, torch.zeros(2, 3)) and torch.equal(arg, torch.zeros(2, 3, dtype=torch.long))
    assert torch.equal(ts.segment_csr(src, torch.tensor([0, 0, 0])), torch.zeros(2, 3))
    assert ts.segment_coo(src, index).shape == (0, 3)
    assert ts.gather_csr(torch.zeros(0, 3), torch.tensor([0])).shape == (0, 3)


def _grouped(src, index, fn):
    out = torch.empty_like(src)
    for n in index.unique():
        mask = index == n
        out[mask] = fn(src[mask])
    return out


def test_composites_match_torch():
    g = torch.Generator().manual_seed(11)
    src = torch.randn(12, generator=g, dtype=torch.float64) * 5
    index = torch.tensor([0, 1, 0, 3, 3, 3, 1, 0, 0, 3, 1, 1])
    assert torch.allclose(ts.scatter_softmax(src, index), _grouped(src, index, lambda x: torch.softmax(x, 0)))
    assert torch.allclose(ts.scatter_log_softmax(src, index), _grouped(src, index, lambda x: torch.log_softmax(x, 0)))
    lse = ts.scatter_logsumexp(src, index)
    want = torch.stack([torch.logsumexp(src[index == n], 0) if (index == n).any() else torch.tensor(0.0,
                        dtype=torch.float64) for n in range(4)])
    assert torch.allclose(lse, want) and lse[2] == 0  # an empty position is 0
    std = ts.scatter_std(src, index)
    want = torch.stack([src[index == n].std() if (index == n).any() else torch.tensor(0.0, dtype=torch.float64)
                        for n in range(4)])
    assert torch.allclose(std, want, atol=1e-6)
    with pytest.raises(ValueError, match="floating point"):
        ts.scatter_softmax(torch.tensor([1, 2]), torch.tensor([0, 0]))


def test_gradients():
    src = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    index = torch.tensor([0, 1, 0, 2, 2, 2])
    ts.scatter_mean(src, index, dim=0).pow(2).sum().backward()
    ref = src.detach().clone().requires_grad_()
    torch.zeros(3, 3, dtype=torch.float64).scatter_reduce(0, _broadcast_index(index, ref, 0), ref, "mean",
                                                          include_self=False).pow(2).sum().backward()
    assert torch.allclose(src.grad, ref.grad)
    src.grad = None
    ts.scatter_softmax(src, index, dim=0).mul(torch.arange(18.0, dtype=torch.float64).view(6, 3)).sum().backward()
    ref.grad = None
    _grouped(ref, index, lambda x: torch.softmax(x, 0)).mul(torch.arange(18.0, dtype=torch.float64).view(6, 3)) \
        .sum().backward()
    assert torch.allclose(src.grad, ref.grad)
    out = torch.zeros(3, 3, dtype=torch.float64)
    with pytest.raises(TypeError, match="scatter_max: expected inputs that do not require grad when out is given"):
        ts.scatter_max(src, index, dim=0, out=out)
    with pytest.raises(TypeError, match="segment_csr: .*when out is given"):
        ts.segment_csr(src, torch.tensor([0, 6]), out=torch.zeros(1, 3, dtype=torch.float64))
    with pytest.raises(TypeError, match="gather_coo: .*when out is given"):
        ts.gather_coo(src, torch.tensor([0, 0, 1]), out=torch.zeros(3, 3, dtype=torch.float64))


def _distinct(*shape, seed=0):
    """float64 values far apart (no ties, so min/max are differentiable)."""
    gen = torch.Generator().manual_seed(seed)
    n = 1
    for d in shape:
        n *= d
    return (torch.randperm(n, generator=gen).to(torch.float64) * 0.37 - n / 5).reshape(shape).requires_grad_()


INDPTR = torch.tensor([0, 2, 2, 5])  # segment 1 empty; row 5 of src is in no segment
COO_INDEX = torch.tensor([0, 0, 2, 2, 2, 3])  # rows 1 and 4 (dim_size 5) are empty


def _grad_cases():
    """(id, f(src) -> tensor) over a (6, 3) src, reduced along dim 0 (and along dim 1 for the scatters)."""
    index = torch.tensor([0, 1, 0, 3, 3, 3])  # position 2 (and 4 with dim_size 5) gets nothing
    cases = [
        ("scatter_mul", lambda x: ts.scatter_mul(x, index, dim=0, dim_size=5)),
        ("scatter_mul-dim1", lambda x: ts.scatter_mul(x, torch.tensor([1, 0, 1]), dim=1)),
        ("gather_csr", lambda x: ts.gather_csr(x[:3], INDPTR)),
        ("gather_coo", lambda x: ts.gather_coo(x[:4], COO_INDEX)),
    ]
    for reduce in ("min", "max"):
        cases += [
            (f"scatter_{reduce}", lambda x, r=reduce: getattr(ts, f"scatter_{r}")(x, index, dim=0, dim_size=5)[0]),
            (f"scatter_{reduce}-dim1", lambda x, r=reduce: ts.scatter(x, torch.tensor([1, 1, 0]), 1, reduce=r)),
        ]
    for reduce in ("sum", "mean", "min", "max"):
        cases += [
            (f"segment_csr-{reduce}", lambda x, r=reduce: ts.segment_csr(x, INDPTR, reduce=r)),
            (f"segment_coo-{reduce}", lambda x, r=reduce: ts.segment_coo(x, COO_INDEX, dim_size=5, reduce=r)),
            (f"segment_csr-{reduce}-2d", lambda x, r=reduce: ts.segment_csr(
                x.t(), torch.tensor([[0, 1, 1, 4], [0, 3, 6, 6], [2, 2, 2, 2]]), reduce=r)),
            (f"segment_coo-{reduce}-2d", lambda x, r=reduce: ts.segment_coo(
                x.t(), torch.tensor([[0, 0, 1, 1, 1, 3], [1, 1, 1, 1, 2, 2], [0, 1, 2, 3, 4, 5]]), dim_size=6,
                reduce=r)),
        ]
    return cases


GRAD_CASES = _grad_cases()


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradcheck(case):
    _, f = case
    src = _distinct(6, 3, seed=1)
    if case[0].startswith("scatter_mul"):
        with torch.no_grad():
            src[0, 0] = src[2, 0] = 0.0  # two zeros meet
            src[1, 1] = 0.0  # a lone zero
            src.div_(src.abs().max())  # products stay moderate
    out = f(src)
    assert out.requires_grad and out.grad_fn is not None
    assert torch.autograd.gradcheck(f, (src,), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_segment_gradients_match_torch_segment_reduce(reduce):
    src = _distinct(6, 3, seed=2)
    lengths = INDPTR[1:] - INDPTR[:-1]
    grad = torch.randn(3, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    ref = src.detach()[:5].clone().requires_grad_()  # torch's segments must cover the data
    (theirs,) = torch.autograd.grad(torch.segment_reduce(ref, reduce, lengths=lengths, axis=0), (ref,), grad)
    theirs = torch.cat([theirs, torch.zeros(1, 3, dtype=torch.float64)])
    for got in (ts.segment_csr(src, INDPTR, reduce=reduce),
                ts.segment_coo(src[:5], torch.tensor([0, 0, 2, 2, 2]), dim_size=3, reduce=reduce)):
        (mine,) = torch.autograd.grad(got, (src,), grad)
        torch.testing.assert_close(mine, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("reduce", ["mul", "min", "max"])
def test_scatter_gradients_match_torch_scatter_reduce(reduce):
    src = _distinct(6, 3, seed=3)
    index = torch.tensor([0, 1, 0, 3, 3, 3])
    grad = torch.randn(5, 3, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    (mine,) = torch.autograd.grad(ts.scatter(src, index, 0, dim_size=5, reduce=reduce), (src,), grad)
    torch_reduce = {"mul": "prod", "min": "amin", "max": "amax"}[reduce]
    start = torch.ones(5, 3, dtype=torch.float64) if reduce == "mul" else torch.zeros(5, 3, dtype=torch.float64)
    expected = start.scatter_reduce(0, _broadcast_index(index, src, 0), src, torch_reduce,
                                    include_self=reduce == "mul")
    (theirs,) = torch.autograd.grad(expected, (src,), grad)
    torch.testing.assert_close(mine, theirs, rtol=1e-12, atol=1e-12)


def test_arg_gradient_ignores_empty_positions_and_flows_to_the_arg():
    src = torch.tensor([[1.0, 5.0], [4.0, 2.0], [3.0, 7.0]], dtype=torch.float64, requires_grad=True)
    values, arg = ts.scatter_max(src, torch.tensor([0, 0, 2]), dim=0, dim_size=4)
    assert arg.tolist() == [[1, 0], [3, 3], [2, 2], [3, 3]] and not arg.requires_grad
    (grad,) = torch.autograd.grad(values, (src,), torch.arange(1.0, 9.0, dtype=torch.float64).view(4, 2))
    assert grad.tolist() == [[0.0, 2.0], [1.0, 0.0], [5.0, 6.0]]


def test_errors_name_op_and_values():
    src = torch.ones(4)
    with pytest.raises(ValueError, match=r"segment_csr: expected indptr to be sorted.*got 1 after 3"):
        ts.segment_csr(src, torch.tensor([0, 3, 1]))
    with pytest.raises(IndexError, match=r"segment_csr: expected indptr values in \[0, src.size\(0\) = 4\], got 6"):
        ts.segment_csr(src, torch.tensor([0, 6]))
    with pytest.raises(ValueError, match="segment_coo: expected index to be sorted"):
        ts.segment_coo(src, torch.tensor([1, 0, 0, 0]))
    with pytest.raises(IndexError, match="out of bounds"):
        ts.scatter_max(src, torch.tensor([0, 1, 2, 3]), dim_size=2)
    with pytest.raises(TypeError, match="int32 or int64"):
        ts.segment_csr(src, torch.tensor([0.0, 4.0]))
    with pytest.raises(ValueError):
        ts.scatter(src, torch.tensor([0, 0, 0, 0]), reduce="median")


@pytest.mark.parametrize("reduce", ["sum", "mean", "mul"])
def test_gradients_through_out(reduce):
    """With out (a non-leaf), sum, mean and mul record their write into out: gradients in src and out."""
    src = _distinct(6, 3, seed=6)
    start = _distinct(4, 3, seed=7)
    index = torch.tensor([0, 1, 0, 3, 3, 3])

    def f(src, start):
        out = start * 1.0
        return ts.scatter(src, index, 0, out=out, reduce=reduce)

    small = [(t.detach() / 4).requires_grad_() for t in (src, start)]
    assert torch.autograd.gradcheck(f, tuple(small), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_backward_creates_no_tensor_without_a_device(case):
    """As test_autograd's check: a tensor a backward creates without naming a device would be a CPU tensor
    beside CUDA inputs."""
    from test_autograd import _FactoryCalls

    op_id, f = case
    out = f(_distinct(6, 3, seed=8))
    arg_grad = (None,) if "min" in op_id or "max" in op_id else ()  # min/max nodes also take arg's gradient
    calls = _FactoryCalls()
    with calls:  # the node's own backward, called here (the engine would run it outside the mode)
        out.grad_fn.apply(torch.ones_like(out), *arg_grad)
    assert calls.without_device == []


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16])
@pytest.mark.parametrize("reduce", ["min", "max"])
def test_scatter_min_max_without_grad_match_the_arg_path(dtype, reduce):
    # scatter(reduce='max') and the softmax family take the values without the arg when no gradient is
    # recorded (one amax scatter into zeros); they must give what scatter_max(...)[0] gives, empty positions
    # (0) and NaN included.
    g = torch.Generator().manual_seed(11)
    src = (torch.randn(40, 3, 5, generator=g) * 4).to(dtype)
    if dtype.is_floating_point:
        src[3, 1, 2] = float("nan")
        src[7, 0, 0] = float("-inf")
    index = torch.randint(0, 9, (3,), generator=g)  # along dim 1, broadcast over the trailing dim
    for dim, idx, size in ((0, torch.randint(0, 50, (40,), generator=g), 60), (1, index, 12), (-2, index, None)):
        want = getattr(ts, f"scatter_{reduce}")(src, idx, dim, dim_size=size)[0]
        got = ts.scatter(src, idx, dim, dim_size=size, reduce=reduce)
        assert torch.equal(got.isnan(), want.isnan()) if dtype.is_floating_point else True
        assert torch.equal(torch.nan_to_num(got.float()), torch.nan_to_num(want.float())), (dim, size)
    if dtype == torch.float64:  # with a gradient to record: the arg path, one winner per position gets 1
        x = torch.randn(40, 3, 5, generator=g, dtype=dtype, requires_grad=True)
        ts.scatter(x, index, 1, reduce=reduce).sum().backward()
        assert x.grad.sum().item() == 40 * 5 * len(index.unique())
        assert set(x.grad.unique().tolist()) <= {0.0, 1.0}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64])
def test_scatter_mean_without_grad_is_sum_over_clamped_count(dtype):
    # The one-pass mean taken when no gradient is recorded gives torch_scatter's sum / clamp(count, 1) bit for
    # bit (floor division for integers), empty positions 0.
    g = torch.Generator().manual_seed(5)
    src = (torch.randn(500, 6, generator=g) * 10).to(dtype)
    index = torch.randint(0, 120, (500,), generator=g)
    got = ts.scatter_mean(src, index, 0, dim_size=130)
    total = ts.scatter_sum(src, index, 0, dim_size=130)
    count = torch.bincount(index, minlength=130).clamp(min=1).to(dtype)[:, None]
    want = total / count if dtype.is_floating_point else torch.div(total, count, rounding_mode="floor")
    assert torch.equal(got, want)
    assert torch.equal(got[120:], torch.zeros(10, 6, dtype=dtype))


@pytest.mark.parametrize("reduce", ["sum", "add", "mean", "max", "min"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_rows_fast_path_is_bit_identical(reduce, dtype, index_dtype):
    """A 1-d index over the rows (dim 0) without gradient takes the grouped, write-once path; the same index
    broadcast to src's shape by hand takes the general one: the results agree bit for bit, and with torch."""
    g = torch.Generator().manual_seed(11)
    src = torch.randn(3000, 17, generator=g, dtype=dtype)
    index = torch.randint(0, 400, (3000,), generator=g).to(index_dtype)
    fast = ts.scatter(src, index, 0, dim_size=405, reduce=reduce)
    general = ts.scatter(src, index[:, None].expand(-1, 17), 0, dim_size=405, reduce=reduce)
    assert torch.equal(fast, general)
    core = {"sum": "sum", "add": "sum", "mean": "mean", "max": "amax", "min": "amin"}[reduce]
    want = torch.zeros(405, 17, dtype=dtype).scatter_reduce_(0, index.long()[:, None].expand(-1, 17), src, core,
                                                            include_self=False)
    torch.testing.assert_close(fast, want)
    # 1-d src along dim -1 (= 0) and a strided src take the same path.
    torch.testing.assert_close(ts.scatter(src[:, 3], index, -1, reduce=reduce),
                               ts.scatter(src[:, 3].clone(), index.long(), 0, reduce=reduce), rtol=0, atol=0)


def test_rows_fast_path_reports_bad_indices_as_scatter():
    src = torch.ones(4, 2)
    with pytest.raises(IndexError, match="scatter"):
        ts.scatter(src, torch.tensor([0, 1, 5, 1]), 0, dim_size=3)
    with pytest.raises(IndexError, match="scatter_add_: index -1 is out of bounds"):
        ts.scatter_sum(src, torch.tensor([0, -1, 2, 1]), 0)


@pytest.mark.parametrize("reduce", ["sum", "mean", "min", "max", "mul"])
def test_rows_of_a_1d_index_take_the_fused_path(monkeypatch, reduce):
    """scatter over the rows (dim 0) of float32/float64 src by a 1-d index, without out or gradient, runs the
    fused scatter_rows (one fold per destination row) for sum, mean, min and max, with the general path's bits;
    mul, an `out`, a gradient and a 2-d index take the general path."""
    import scatterx

    calls = []
    original = scatterx._C.scatter_rows

    def spy(src, *rest):  # src arrives as a CPU tensor's DLPack capsule: a tensor again, to read its rank
        src = torch.from_dlpack(src)
        calls.append(src.dim())  # the calls on src itself (mean's counts would be a 1-d tensor of ones)
        return original(src, *rest)

    monkeypatch.setattr(scatterx._C, "scatter_rows", spy)
    g = torch.Generator().manual_seed(3)
    src = torch.randn(500, 4, 3, generator=g, dtype=torch.float64)
    index = torch.randint(0, 60, (500,), generator=g)
    got = ts.scatter(src, index, dim=0, dim_size=64, reduce=reduce)
    fused = reduce != "mul"
    assert calls == ([3] if fused else [])
    general = ts.scatter(src, index.view(-1, 1, 1).expand_as(src), dim=0, dim_size=64, reduce=reduce)
    assert torch.equal(got, general)
    calls.clear()
    ts.scatter(src, index, dim=0, out=torch.zeros(64, 4, 3, dtype=src.dtype), reduce=reduce)
    ts.scatter(src.clone().requires_grad_(), index, dim=0, dim_size=64, reduce=reduce)
    assert 3 not in calls
