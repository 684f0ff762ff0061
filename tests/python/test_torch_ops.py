"""scatterx on torch tensors against torch's own ops, every op x dtype (bfloat16 included).

Compared exactly, except where torch differs by design:
  - float16/bfloat16 sums, means, products and scaled index_add: scatterx
    folds in float32 and rounds once, torch's CPU kernels round per step.
    scatterx must equal torch's float32 result rounded once (exactly), and
    its sums/means must lie within the per-step rounding error of torch's
    own half result.
  - complex products and means, and index_add with alpha != 1 on floats:
    torch's vectorized kernels may fuse a multiply-add (one rounding where
    scatterx has two), so these agree to a few ulps.
  - scatter with reduce None and duplicate indices is undefined in torch:
    compared on indices unique along dim only.
"""


import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch not installed")

import scatterx as sx  # noqa: E402
from sx_reference import random_values, scatter_case, seed_for, vector_case  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # torch: index_reduce is beta; scatter reduce= deprecated

TORCH_DTYPES = [
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128,
    torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool,
]
HALVES = (torch.float16, torch.bfloat16)


def tid(dt) -> str:
    return str(dt).replace("torch.", "")


def np_dtype(dt):
    return np.float32 if dt == torch.bfloat16 else torch.empty(0, dtype=dt).numpy().dtype


def supported(reduce, dt):
    if reduce in ("amax", "amin") and dt.is_complex:
        return False
    return not (reduce == "mean" and dt == torch.bool)


def to_torch(a: np.ndarray, dt, layout: str, rng) -> "torch.Tensor":
    """The values of a as a tensor of dtype dt with the given memory layout (torch has no negative strides)."""
    t = torch.from_numpy(np.array(a, order="C", copy=True)).to(dt)
    if layout == "transposed" and t.dim() >= 2:
        perm = [int(p) for p in rng.permutation(t.dim())]
        while perm == sorted(perm):
            perm = [int(p) for p in rng.permutation(t.dim())]
        inv = [int(p) for p in np.argsort(perm)]
        return t.permute(perm).contiguous().permute(inv)
    if layout == "strided" and t.dim() >= 1:
        big = torch.zeros([2 * s + 1 for s in t.shape], dtype=dt)
        view = big[tuple(slice(1, 1 + 2 * s, 2) for s in t.shape)]
        view.copy_(t)
        return view
    return t


def to_torch_index(a: np.ndarray, layout: str, rng):
    """An index tensor; 'expanded' shares rows with stride 0 where the numpy index was broadcast."""
    if layout == "expanded" and a.ndim >= 1 and 0 in a.strides:
        small = np.array(a[tuple(slice(0, 1) if st == 0 else slice(None) for st in a.strides)], copy=True)
        return torch.from_numpy(small).expand(*a.shape)
    return to_torch(a, torch.int64 if a.dtype == np.int64 else torch.int32, layout, rng)


LAYOUTS = ["contiguous", "transposed", "strided", "expanded"]


class TorchCase:
    def __init__(self, rng, dt, index_dtype, layout, family, unique=False):
        ndt = np_dtype(dt)
        np_layout = "broadcast" if layout == "expanded" else "contiguous"
        gen = vector_case if family == "vector" else scatter_case
        # No inf/NaN in complex numbers: torch's complex kernels multiply by alpha=1 and divide means in
        # complex arithmetic, which turns (inf + 1j) into NaN parts where scatterx's textbook folds do not.
        c = gen(rng, ndt, index_dtype, np_layout, unique=unique, special=not dt.is_complex)
        if family != "vector" and layout == "expanded":
            c.self = np.array(c.self)  # self stays dense here; the index and src are expanded
        self.dim = c.dim
        self.self = to_torch(c.self, dt, "contiguous" if layout == "expanded" else layout, rng)
        self.src = to_torch(np.array(c.src), dt, "contiguous" if layout == "expanded" else layout, rng)
        self.index = to_torch_index(c.index, layout, rng)
        self.index64 = self.index.to(torch.int64)
        self.desc = (f"layout={layout} dim={self.dim} self={list(self.self.shape)}{self.self.stride()} "
                     f"index={self.index.tolist()} {self.index.stride()} src={list(self.src.shape)}")

    def clones(self):
        return [t.clone() for t in (self.self, self.index, self.src)]

    def check_unchanged(self, before):
        for t, b in zip((self.self, self.index, self.src), before):
            assert torch.equal(t, b) or (t.is_floating_point() and torch.equal(t.isnan(), b.isnan())
                                         and torch.equal(t.nan_to_num(0), b.nan_to_num(0))), "an input was modified"


def check_result(result, expected, context, *, rtol=0.0, atol=0.0):
    assert isinstance(result, torch.Tensor), f"{context}: expected a torch.Tensor, got {type(result).__name__}"
    assert result.dtype == expected.dtype, f"{context}: dtype {result.dtype}, expected {expected.dtype}"
    assert result.shape == expected.shape, f"{context}: shape {tuple(result.shape)}, expected {tuple(expected.shape)}"
    assert result.device.type == "cpu"
    torch.testing.assert_close(result, expected, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m: f"{context}: {m}")


def upcast(t):
    return t.to(torch.float32) if t.dtype in HALVES else t


# ---- op table: (id, family, scatterx call, torch call, accumulates, unique) ----------------------------

def _ops():
    ops = [
        ("gather", "scatter", lambda c, s: sx.gather(s, c.dim, c.index),
         lambda c, s, src: torch.gather(s, c.dim, c.index64), None, False),
        ("index_select", "vector", lambda c, s: sx.index_select(s, c.dim, c.index),
         lambda c, s, src: torch.index_select(s, c.dim, c.index64), None, False),
        ("scatter-src-none", "scatter", lambda c, s: sx.scatter(s, c.dim, c.index, c.src),
         lambda c, s, src: torch.scatter(s, c.dim, c.index64, src), None, True),
        ("scatter-value-none", "scatter", lambda c, s: sx.scatter(s, c.dim, c.index, 3),
         lambda c, s, src: torch.scatter(s, c.dim, c.index64, 3), None, False),
        ("scatter_add", "scatter", lambda c, s: sx.scatter_add(s, c.dim, c.index, c.src),
         lambda c, s, src: torch.scatter_add(s, c.dim, c.index64, src), "sum", False),
    ]
    for r, tr in (("add", "sum"), ("multiply", "prod")):
        ops.append((f"scatter-src-{r}", "scatter", lambda c, s, r=r: sx.scatter(s, c.dim, c.index, c.src, reduce=r),
                    lambda c, s, src, r=r: torch.scatter(s, c.dim, c.index64, src, reduce=r), tr, False))
        ops.append((f"scatter-value-{r}", "scatter", lambda c, s, r=r: sx.scatter(s, c.dim, c.index, value=3, reduce=r),
                    lambda c, s, src, r=r: torch.scatter(s, c.dim, c.index64, 3, reduce=r), tr, False))
    for r in ("sum", "prod", "mean", "amax", "amin"):
        for inc in (True, False):
            ops.append((f"scatter_reduce-{r}-{'self' if inc else 'noself'}", "scatter",
                        lambda c, s, r=r, inc=inc: sx.scatter_reduce(s, c.dim, c.index, c.src, r, include_self=inc),
                        lambda c, s, src, r=r, inc=inc: torch.scatter_reduce(s, c.dim, c.index64, src, r,
                                                                              include_self=inc), r, False))
    for alpha in (1, 3):
        ops.append((f"index_add-alpha_{alpha}", "vector",
                    lambda c, s, alpha=alpha: sx.index_add(s, c.dim, c.index, c.src, alpha=_alpha(alpha, s.dtype)),
                    lambda c, s, src, alpha=alpha: torch.index_add(s, c.dim, c.index64, src,
                                                                   alpha=_alpha(alpha, s.dtype)),
                    "sum" if alpha == 1 else "scaled", False))
    for r in ("prod", "mean", "amax", "amin"):
        for inc in (True, False):
            ops.append((f"index_reduce-{r}-{'self' if inc else 'noself'}", "vector",
                        lambda c, s, r=r, inc=inc: sx.index_reduce(s, c.dim, c.index, c.src, r, include_self=inc),
                        lambda c, s, src, r=r, inc=inc: s.index_reduce(c.dim, c.index64, src, r, include_self=inc),
                        r, False))
    return ops


def _alpha(alpha, dt):
    if alpha == 1:
        return 1
    if dt == torch.bool:
        return True  # torch: only bool tensors take a bool alpha; scaled by True is the identity
    return 2.5 if (dt.is_floating_point or dt.is_complex) else 3


OPS = _ops()


def _reduce_of(op_id):
    for r in ("sum", "prod", "mean", "amax", "amin"):
        if f"-{r}" in op_id:
            return r
    return None


def _expected(op, case, dt, context):
    """torch's answers, each with the tolerance it is compared with."""
    _, _, _, torch_call, accumulates, _ = op
    if dt in HALVES and accumulates not in (None, "amax", "amin"):
        # scatterx folds in float32 and rounds once: it must equal torch's float32 result rounded once
        once = torch_call(case, upcast(case.self), upcast(case.src)).to(dt)
        if accumulates == "sum":
            # and lie within the per-step rounding error of torch's own half sum
            try:
                native = torch_call(case, case.self, case.src)
            except RuntimeError:  # some torch versions have no working kernel for a half case
                native = None
            if native is not None:
                magnitude = torch_call(case, upcast(case.self).abs(), upcast(case.src).abs())
                eps = torch.finfo(dt).eps
                tol = (case.index.numel() + 1) * eps * magnitude + 1e-3
                diff = (once.to(torch.float32) - native.to(torch.float32)).abs()
                finite = native.isfinite() & once.isfinite()
                assert bool((diff[finite] <= tol[finite]).all()), f"{context}: half sum far from torch's:\n{once}\n{native}"
        return [(once, 0.0, 0.0)]
    exact = torch_call(case, case.self, case.src)
    if dt.is_complex and accumulates in ("prod", "mean", "scaled"):
        return [(exact, 1e-5 if dt == torch.complex64 else 1e-12, 1e-6 if dt == torch.complex64 else 1e-14)]
    if accumulates == "scaled" and dt.is_floating_point:
        return [(exact, 1e-6 if dt == torch.float32 else 1e-14, 1e-6)]
    return [(exact, 0.0, 0.0)]


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64], ids=["i32", "i64"])
@pytest.mark.parametrize("dt", TORCH_DTYPES, ids=tid)
@pytest.mark.parametrize("op", OPS, ids=[o[0] for o in OPS])
def test_matches_torch(op, dt, index_dtype):
    op_id, family, sx_call, torch_call, _, unique = op
    reduce = _reduce_of(op_id)
    rng = np.random.default_rng(seed_for("torch", op_id, tid(dt), np.dtype(index_dtype).name))
    if reduce is not None and not supported(reduce, dt):
        case = TorchCase(rng, dt, index_dtype, "contiguous", family)
        with pytest.raises(TypeError, match="is not supported for"):
            sx_call(case, case.self)
        return
    compared, torch_missing = 0, None
    for n, layout in enumerate(LAYOUTS * 2):
        case = TorchCase(rng, dt, index_dtype, layout, family, unique=unique)
        context = f"{op_id} {tid(dt)} case {n}: {case.desc}"
        before = case.clones()
        result = sx_call(case, case.self)
        case.check_unchanged(before)
        try:
            expectations = _expected(op, case, dt, context)
        except NotImplementedError as e:  # torch has no CPU kernel for this dtype (on some paths)
            torch_missing = str(e)
            continue
        for expected, rtol, atol in expectations:
            check_result(result, expected, context, rtol=rtol, atol=atol)
        compared += 1
    if compared == 0:
        pytest.skip(f"torch cannot compute it: {torch_missing}")


# ---- result types, zero copy, in-place -----------------------------------------------------------------


def test_result_kind_follows_the_main_input():
    idx_np = np.array([0, 1, 0])
    idx_t = torch.tensor([0, 1, 0])
    x_np = np.arange(3.0)
    x_t = torch.arange(3.0, dtype=torch.float64)
    assert isinstance(sx.gather(x_t, 0, idx_np), torch.Tensor)
    assert type(sx.gather(x_np, 0, idx_t)) is np.ndarray
    assert isinstance(sx.scatter_add(x_t, 0, idx_t, torch.ones(3, dtype=torch.float64)), torch.Tensor)
    assert type(sx.scatter_add(x_np, 0, idx_np, torch.ones(3, dtype=torch.float64))) is np.ndarray
    assert isinstance(sx.index_add(x_t, 0, idx_np, np.ones(3)), torch.Tensor)
    assert isinstance(sx.index_reduce(x_t, 0, idx_t, x_t, "amax"), torch.Tensor)
    assert isinstance(sx.index_select(x_t, 0, idx_t), torch.Tensor)
    assert isinstance(sx.scatter(x_t, 0, idx_t, 2.0), torch.Tensor)
    r = sx.scatter_reduce(x_t, 0, idx_t, x_t, "sum")
    assert r.dtype == torch.float64 and r.shape == (3,)
    assert not r.requires_grad


def test_torch_out_of_place_does_not_alias_input():
    x = torch.arange(6.0).reshape(2, 3)
    r = sx.scatter_add(x, 1, torch.tensor([[0, 0]]), torch.ones(1, 2))
    assert r.data_ptr() != x.data_ptr()
    r.zero_()
    assert torch.equal(x, torch.arange(6.0).reshape(2, 3))


def test_torch_in_place_on_a_column_slice_writes_the_base():
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    expected = base.clone()
    column = base[:, 2]
    returned = sx.scatter_add_(column, 0, torch.tensor([0, 0, 2]), torch.tensor([1.0, 2.0, 3.0]))
    assert returned is column
    expected[:, 2] += torch.tensor([3.0, 0.0, 3.0])
    assert torch.equal(base, expected)


@pytest.mark.parametrize("op", ["scatter_", "scatter_value_", "scatter_add_", "scatter_reduce_", "index_add_",
                                "index_reduce_"])
def test_torch_in_place_forms_match_torch_in_place(op):
    rng = np.random.default_rng(seed_for("inplace", op))
    base = torch.from_numpy(random_values(rng, (5, 6), np.float64))
    view = base[1:, ::2]  # (4, 3), strided
    mine, theirs = base.clone(), base.clone()
    mv, tv = mine[1:, ::2], theirs[1:, ::2]
    idx2 = torch.tensor([[3, 0, 1], [3, 3, 2]])
    idx_unique = torch.tensor([[3, 0, 1], [2, 3, 2]])
    idx1 = torch.tensor([2, 0, 2])
    src = torch.from_numpy(random_values(rng, (3, 3), np.float64))
    srcT = torch.from_numpy(random_values(rng, (4, 3), np.float64))[:, :3]
    calls = {
        "scatter_": (lambda t: sx.scatter_(t, 0, idx_unique, src), lambda t: t.scatter_(0, idx_unique, src)),
        "scatter_value_": (lambda t: sx.scatter_(t, 0, idx2, 2.5, reduce="multiply"),
                           lambda t: t.scatter_(0, idx2, 2.5, reduce="multiply")),
        "scatter_add_": (lambda t: sx.scatter_add_(t, 0, idx2, src), lambda t: t.scatter_add_(0, idx2, src)),
        "scatter_reduce_": (lambda t: sx.scatter_reduce_(t, 0, idx2, src, "mean", include_self=False),
                            lambda t: t.scatter_reduce_(0, idx2, src, "mean", include_self=False)),
        "index_add_": (lambda t: sx.index_add_(t, 1, idx1, srcT, alpha=-2),
                       lambda t: t.index_add_(1, idx1, srcT, alpha=-2)),
        "index_reduce_": (lambda t: sx.index_reduce_(t, 1, idx1, srcT, "amin"),
                          lambda t: t.index_reduce_(1, idx1, srcT, "amin")),
    }
    mine_call, torch_call = calls[op]
    assert mine_call(mv) is mv
    torch_call(tv)
    torch.testing.assert_close(mine, theirs, rtol=0, atol=0, equal_nan=True)
    assert view.shape == mv.shape


def test_bfloat16_rounds_once():
    # 256 + 1 + 1 in bfloat16 (8 bits of mantissa): stepwise 257 rounds to 256 twice; in float32 it is 258.
    out = sx.scatter_add(torch.tensor([256.0], dtype=torch.bfloat16), 0, torch.tensor([0, 0]),
                         torch.tensor([1.0, 1.0], dtype=torch.bfloat16))
    assert out.dtype == torch.bfloat16 and out.item() == 258.0
    assert torch.tensor([256.0], dtype=torch.bfloat16).scatter_add(0, torch.tensor([0, 0]),
                                                                   torch.tensor([1.0, 1.0], dtype=torch.bfloat16)).item() in (256.0, 258.0)


def test_zero_dim_tensors_match_torch():
    x = torch.tensor(2.5)
    i = torch.tensor(0)
    s = torch.tensor(4.0)
    for mine, theirs in [
        (sx.gather(x, 0, i), torch.gather(x, 0, i)),
        (sx.index_select(x, 0, i), torch.index_select(x, 0, i)),
        (sx.scatter_add(x, 0, i, s), torch.scatter_add(x, 0, i, s)),
        (sx.scatter_reduce(x, -1, i, s, "amin", include_self=False), torch.scatter_reduce(x, -1, i, s, "amin",
                                                                                          include_self=False)),
        (sx.index_add(x, 0, i, s, alpha=2), torch.index_add(x, 0, i, s, alpha=2)),
        (sx.gather(torch.arange(3.0), 0, torch.tensor(1)), torch.gather(torch.arange(3.0), 0, torch.tensor(1))),
    ]:
        check_result(mine, theirs, "0-d")


def test_non_contiguous_dlpack_views_are_not_copied():
    """A write through scatter_ lands in the tensor's storage, whatever the view."""
    base = torch.zeros(4, 6, dtype=torch.int64)
    view = base.t()[1::2]  # (3, 4), strides (2, 6)
    sx.scatter_(view, 1, torch.tensor([[3], [0], [2]]), torch.tensor([[7], [8], [9]]))
    expected = torch.zeros(4, 6, dtype=torch.int64)
    expected[3, 1], expected[0, 3], expected[2, 5] = 7, 8, 9
    assert torch.equal(base, expected)


def test_cpu_tensors_reach_the_extension_as_capsules_of_their_own_memory():
    """_exported hands a CPU tensor over as to_dlpack's capsule (a tenth of __dlpack__'s cost), over the
    tensor's own memory; numpy arrays and other arguments pass as they are, lists element by element."""
    from scatterx._ops import _exported

    t = torch.arange(6, dtype=torch.float32).reshape(2, 3).t()  # a strided view
    cap = _exported(t)
    assert type(cap).__name__ == "PyCapsule"
    back = torch.utils.dlpack.from_dlpack(cap)
    assert back.data_ptr() == t.data_ptr() and back.stride() == t.stride() and torch.equal(back, t)
    a = np.ones(3)
    assert _exported(a) is a and _exported(5) == 5
    mixed = _exported([t, a])
    assert type(mixed[0]).__name__ == "PyCapsule" and mixed[1] is a


def test_plain_cpu_tensors_skip_the_conversions_and_others_still_get_them():
    """_arg / _out hand a plain CPU tensor (exactly torch.Tensor, no grad, values as stored) straight to
    to_dlpack; a tensor that records grad (read under no_grad), a Parameter, a conjugate or negative view take
    the general conversion (detached, materialized) and reach the extension as capsules all the same."""
    from scatterx._ops import _arg, _out, _plain_cpu_capsule

    def as_tensor(capsule):
        assert type(capsule).__name__ == "PyCapsule"
        return torch.utils.dlpack.from_dlpack(capsule)

    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)[:, 1:]  # a strided view
    back = as_tensor(_out(t, "op", "input"))
    assert back.data_ptr() == t.data_ptr() and back.stride() == t.stride() and torch.equal(back, t)
    leaf = torch.ones(3, requires_grad=True)
    parameter = torch.nn.Parameter(torch.full((2,), 5.0))
    c = torch.tensor([1 + 2j, 3 - 1j]).conj()
    n = torch.tensor([1.0, 2.0])._neg_view()
    for x in (leaf, parameter, c, n):
        assert _plain_cpu_capsule(x) is None
    with torch.no_grad():
        assert as_tensor(_arg(leaf, "op", "x")).data_ptr() == leaf.data_ptr()
        assert torch.equal(as_tensor(_arg(parameter, "op", "x")), parameter.detach())
    assert torch.equal(as_tensor(_arg(c, "op", "x")), c.resolve_conj())  # the values it means
    assert torch.equal(as_tensor(_arg(n, "op", "x")), torch.tensor([-1.0, -2.0]))
    with pytest.raises(ValueError, match="op: expected input to hold its values as stored"):
        _out(n, "op", "input")
    with pytest.raises(TypeError, match="op: expected x to be a numpy array or a torch tensor, got list"):
        _arg([1, 2], "op", "x")


def test_index_add_under_no_grad_takes_tensors_that_require_grad():
    """The fast path must not drop the detaching: under no_grad an in-place op into a leaf that requires grad,
    from a source that requires grad, reads and writes them as torch's does."""
    index = torch.tensor([0, 2, 2, 1, 0])
    mine, theirs = (torch.zeros(3, 3, requires_grad=True) for _ in range(2))
    src = torch.randn(5, 3, requires_grad=True)
    with torch.no_grad():
        assert sx.index_add_(mine, 0, index, src) is mine
        theirs.index_add_(0, index, src)
    assert mine.requires_grad and torch.equal(mine.detach(), theirs.detach())


def test_an_op_takes_the_plain_path_only_when_every_tensor_is_plain():
    """_plain_cpu_capsules is all or nothing: capsules of every array's own memory when all are plain CPU
    tensors, else None, and the op then converts each argument as before (a negative view's values as it
    means them, a numpy index as it is, grad routed)."""
    from scatterx._ops import _plain_cpu_capsules

    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)[:, 1:]  # a strided view
    index = torch.tensor([2, 0, 2, 1])
    capsules = _plain_cpu_capsules(x, index)
    backs = [torch.utils.dlpack.from_dlpack(c) for c in capsules]
    assert [b.data_ptr() for b in backs] == [x.data_ptr(), index.data_ptr()]
    assert backs[0].stride() == x.stride() and torch.equal(backs[1], index)
    odd = [index.numpy(), torch.ones(4, requires_grad=True), torch.nn.Parameter(torch.ones(4)),
           torch.tensor([1 + 2j]).conj(), torch.tensor([1.0])._neg_view(), 3]
    for other in odd:
        assert _plain_cpu_capsules(x, other) is None and _plain_cpu_capsules(other, x) is None

    source = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0], [1.0, 1.0, 1.0]])._neg_view()
    torch.testing.assert_close(sx.index_add(x, 0, index, source), x.index_add(0, index, source), rtol=0, atol=0)
    torch.testing.assert_close(sx.index_select(x, 0, index.numpy()), x.index_select(0, index), rtol=0, atol=0)
    leaf = x.clone().requires_grad_()
    sx.index_select(leaf, 0, index).sum().backward()
    assert torch.equal(leaf.grad, torch.zeros(3, 3).index_add_(0, index, torch.ones(4, 3)))


def test_new_torch_results_own_their_memory():
    """A result leaves the extension as a DLPack capsule that torch adopts: it outlives every argument, is
    writable, and a second result never shares its memory."""
    import gc

    x = torch.randn(64, 8)
    index = torch.randint(0, 64, (100,))
    expected = x.index_select(0, index)
    first = sx.index_select(x, 0, index)
    second = sx.index_select(x, 0, index)
    assert first.data_ptr() != second.data_ptr()
    del x, index
    gc.collect()
    scratch = [torch.randn(64, 8) for _ in range(8)]  # reuse of freed memory would show in the results
    assert torch.equal(first, expected) and torch.equal(second, expected) and len(scratch) == 8
    first.add_(1)
    assert torch.equal(first, expected + 1) and torch.equal(second, expected)
