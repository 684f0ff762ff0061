"""Gradients: torch.autograd.gradcheck (float64) of the differentiable ops through scatterx.torch and
through the plain scatterx functions (which route there when an input requires grad), scatterx's
gradients against torch's own, and the refusal of ops that have no gradient."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch not installed")

import scatterx as sx  # noqa: E402
import scatterx.torch as sxt  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _distinct(shape, gen, scale=1.0):
    """float64 values, pairwise far apart (no ties, so amax/amin are differentiable)."""
    n = int(np.prod(shape)) if len(shape) else 1
    perm = torch.randperm(n, generator=gen).to(torch.float64)
    return ((perm + 0.1 * torch.rand(n, generator=gen, dtype=torch.float64)) * scale - n / 2).reshape(shape)


def _scatter_inputs(seed, small_index=True):
    gen = torch.Generator().manual_seed(seed)
    self_ = _distinct((4, 5), gen)
    src = _distinct((6, 5), gen, scale=1.3)  # larger than the index: only its leading corner is used
    index = torch.randint(0, 4, (5, 4) if small_index else (6, 5), generator=gen)
    index[0, 0] = index[1, 0]  # make sure of a duplicate
    return self_.requires_grad_(), index, src.requires_grad_()


def _index_inputs(seed, small_index=True):
    gen = torch.Generator().manual_seed(seed)
    self_ = _distinct((5, 3), gen)
    index = torch.tensor([4, 0, 4, 2, 0, 4])
    source = _distinct((6, 3), gen, scale=0.7)
    return self_.requires_grad_(), index, source.requires_grad_()


def _factors(shape, gen):
    """float64 values in +-[0.5, 1.5) (products stay moderate), no zeros yet."""
    sign = torch.randint(0, 2, shape, generator=gen).to(torch.float64) * 2 - 1
    return (torch.rand(shape, generator=gen, dtype=torch.float64) + 0.5) * sign


def _prod_inputs(seed, small_index=True):
    """For prod: a zero in self, a lone zero in src (its gradient is the product of the others) and two
    zeros meeting at one position (their gradients are zero)."""
    gen = torch.Generator().manual_seed(seed)
    self_, src = _factors((4, 5), gen), _factors((6, 5), gen)
    index = torch.randint(0, 4, (5, 4) if small_index else (6, 5), generator=gen)
    index[1, 0] = index[2, 0] = index[0, 0]
    src[0, 0] = src[1, 0] = 0.0  # two zeros meet (and src[2, 0] is a third, non-zero factor)
    index[1, 1] = index[0, 1]
    src[0, 1] = 0.0  # a lone zero
    self_[index[3, 2], 2] = 0.0  # a zero self, hit by src[3, 2]
    return self_.requires_grad_(), index, src.requires_grad_()


def _index_prod_inputs(seed, small_index=True):
    gen = torch.Generator().manual_seed(seed)
    self_, source = _factors((5, 3), gen), _factors((6, 3), gen)
    index = torch.tensor([4, 0, 4, 2, 0, 4])
    source[0, 0] = source[2, 0] = 0.0  # two zeros meet at row 4
    source[1, 1] = 0.0  # a lone zero at row 0
    self_[2, 2] = 0.0  # a zero self, hit by source[3]
    return self_.requires_grad_(), index, source.requires_grad_()


VIAS = {
    "scatterx.torch": sxt,
    "scatterx": sx,  # routes to scatterx.torch because inputs require grad
}


# (id, call(module, inputs), inputs factory, torch's own op)
def _cases():
    cases = [
        ("gather", lambda m, s, i, x: m.gather(s, 1, i[:4]), _scatter_inputs,
         lambda s, i, x: torch.gather(s, 1, i[:4])),
        ("index_select", lambda m, s, i, x: m.index_select(s, 0, i), _index_inputs,
         lambda s, i, x: torch.index_select(s, 0, i)),
        ("scatter_add", lambda m, s, i, x: m.scatter_add(s, 0, i, x), _scatter_inputs,
         lambda s, i, x: torch.scatter_add(s, 0, i, x)),
    ]
    families = (("scatter_reduce", ("sum", "prod", "mean", "amax", "amin"), _scatter_inputs, _prod_inputs),
                ("index_reduce", ("prod", "mean", "amax", "amin"), _index_inputs, _index_prod_inputs))
    for name, reduces, plain, with_zeros in families:
        for reduce in reduces:
            for inc in (True, False):
                cases.append((
                    f"{name}-{reduce}-{'self' if inc else 'noself'}",
                    lambda m, s, i, x, n=name, r=reduce, inc=inc: getattr(m, n)(s, 0, i, x, r, include_self=inc),
                    with_zeros if reduce == "prod" else plain,
                    lambda s, i, x, n=name, r=reduce, inc=inc: getattr(torch, n)(s, 0, i, x, r, include_self=inc)))
    for alpha in (1, 2.5):
        cases.append((f"index_add-alpha_{alpha}", lambda m, s, i, x, a=alpha: m.index_add(s, 0, i, x, alpha=a),
                      _index_inputs, lambda s, i, x, a=alpha: torch.index_add(s, 0, i, x, alpha=a)))
    return cases


CASES = _cases()


@pytest.mark.parametrize("via", list(VIAS), ids=list(VIAS))
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_gradcheck(case, via):
    _, call, inputs, _ = case
    s, i, x = inputs(1)
    module = VIAS[via]
    out = call(module, s, i, x)
    assert out.requires_grad and out.grad_fn is not None, "the result is not recorded for autograd"
    assert torch.autograd.gradcheck(lambda s, x: call(module, s, i, x), (s, x), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_gradients_match_torch(case):
    """Same forward and gradients as torch. torch's backward needs index shaped like src, so no smaller index
    here; index_add with alpha != 1 may differ in the last bit (torch fuses the multiply-add)."""
    op_id, call, inputs, torch_op = case
    for seed in (2, 3, 4):
        s, i, x = inputs(seed, small_index=False)
        out = call(sx, s, i, x)
        expected = torch_op(s, i, x)
        exact = op_id != "index_add-alpha_2.5"
        torch.testing.assert_close(out, expected, rtol=0 if exact else 1e-14, atol=0 if exact else 1e-13)
        grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        mine = torch.autograd.grad(out, (s, x), grad, allow_unused=True)
        theirs = torch.autograd.grad(expected, (s, x), grad, allow_unused=True)
        for name, m, t in zip(("self", "src"), mine, theirs):
            m = torch.zeros_like(s if name == "self" else x) if m is None else m
            t = torch.zeros_like(s if name == "self" else x) if t is None else t
            torch.testing.assert_close(m, t, rtol=1e-12, atol=1e-12, msg=lambda msg: f"grad of {name}: {msg}")


def test_gradient_with_only_src_requiring_grad():
    s, i, x = _scatter_inputs(5, small_index=False)
    s = s.detach()
    out = sx.scatter_reduce(s, 0, i, x, "mean", include_self=False)
    out.sum().backward()
    expected_x = x.detach().clone().requires_grad_()
    torch.scatter_reduce(s, 0, i, expected_x, "mean", include_self=False).sum().backward()
    torch.testing.assert_close(x.grad, expected_x.grad)


@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_tie_rule_shares_the_gradient_evenly(reduce):
    """Ties share the gradient evenly among the elements equal to the result: self counts only when
    include_self (scatterx's documented rule; torch counts a tying self even with include_self=False, so
    its shares sum to less than 1 there, and only include_self=True is compared with torch)."""
    self_ = torch.tensor([3.0, 1.0], dtype=torch.float64, requires_grad=True)
    src = torch.tensor([3.0, 3.0, 1.0 + (0.5 if reduce == "amin" else -0.5)], dtype=torch.float64, requires_grad=True)
    index = torch.tensor([0, 0, 1])
    mine = torch.autograd.grad(sx.scatter_reduce(self_, 0, index, src, reduce).sum(), (self_, src))
    theirs = torch.autograd.grad(torch.scatter_reduce(self_, 0, index, src, reduce).sum(), (self_, src))
    for m, t in zip(mine, theirs):
        torch.testing.assert_close(m, t)
    third = 1 / 3
    torch.testing.assert_close(mine[0], torch.tensor([third, 1.0], dtype=torch.float64))
    torch.testing.assert_close(mine[1], torch.tensor([third, third, 0.0], dtype=torch.float64))
    g_self, g_src = torch.autograd.grad(sx.scatter_reduce(self_, 0, index, src, reduce, include_self=False).sum(),
                                        (self_, src))
    torch.testing.assert_close(g_self, torch.zeros(2, dtype=torch.float64))
    torch.testing.assert_close(g_src, torch.tensor([0.5, 0.5, 1.0], dtype=torch.float64))


# ---- ops without gradient ---------------------------------------------------------------------------


def _no_grad_calls():
    """(id, call returning (result, the array it must be or None))"""
    s = lambda: torch.rand(4, 3, dtype=torch.float64, requires_grad=True)  # noqa: E731
    i2 = torch.tensor([[0, 1, 3], [2, 2, 0]])
    i1 = torch.tensor([3, 0, 3])
    src = lambda: torch.rand(4, 3, dtype=torch.float64, requires_grad=True)  # noqa: E731

    def in_place(f, target, *args, **kw):
        return f(target, *args, **kw), target

    def out_form(f, *args, out, **kw):
        return f(*args, out=out, **kw), out

    return [
        ("scatter", lambda: (sx.scatter(s(), 0, i2, src()), None)),
        ("scatter-src-only", lambda: (sx.scatter(s().detach(), 0, i2, src(), reduce="add"), None)),
        ("scatter-value", lambda: (sx.scatter(s(), 0, i2, 1.5), None)),
        ("scatter_", lambda: in_place(sx.scatter_, s(), 0, i2, src())),
        ("gather-out", lambda: out_form(sx.gather, s(), 0, i2, out=torch.empty(2, 3, dtype=torch.float64))),
        ("gather-out-requires-grad", lambda: out_form(sx.gather, s().detach(), 0, i2, out=torch.empty(
            2, 3, dtype=torch.float64, requires_grad=True))),
        ("index_select-out", lambda: out_form(sx.index_select, s(), 0, i1, out=torch.empty(3, 3, dtype=torch.float64))),
    ]


NO_GRAD = _no_grad_calls()


@pytest.mark.parametrize("call", [c[1] for c in NO_GRAD], ids=[c[0] for c in NO_GRAD])
def test_non_differentiable_ops_refuse_inputs_requiring_grad(call):
    with pytest.raises(TypeError, match=r"call \.detach\(\)"):
        call()
    with torch.no_grad():
        out, target = call()
    if target is None:
        assert isinstance(out, torch.Tensor) and not out.requires_grad
    else:
        assert out is target


def test_an_unknown_reduce_is_refused_with_inputs_requiring_grad():
    s = torch.rand(3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(ValueError, match="median"):
        sxt.scatter_reduce(s, 0, torch.tensor([0, 0]), s[:2], "median")


# ---- in-place forms -------------------------------------------------------------------------------------

IN_PLACE = [c for c in CASES if not c[0].startswith(("gather", "index_select"))]


def _in_place_call(case):
    """The case's call with the in-place function (scatter_reduce -> scatter_reduce_) on a clone of self
    (a non-leaf), checking that it returns the tensor it wrote."""
    op_id, call, _, _ = case
    fn = getattr(sx, op_id.split("-")[0] + "_")

    def write(target, *args, **kwargs):
        out = fn(target, *args, **kwargs)
        assert out is target and out.grad_fn is not None
        return out

    class InPlace:
        def __getattr__(self, name):
            return write

    return lambda s, i, x: call(InPlace(), s.clone(), i, x)


@pytest.mark.parametrize("case", IN_PLACE, ids=[c[0] for c in IN_PLACE])
def test_in_place_gradcheck_and_torch(case):
    """Tensor.*_ on a non-leaf that requires grad: the write is recorded (the backward sees the values from
    before it), gradients checked and equal to torch's (out-of-place) op's."""
    _, _, inputs, torch_op = case
    s, i, x = inputs(16, small_index=False)
    f = _in_place_call(case)
    assert torch.autograd.gradcheck(lambda s, x: f(s, i, x), (s, x), eps=1e-6, atol=1e-5)
    expected = torch_op(s, i, x)
    out = f(s, i, x)
    torch.testing.assert_close(out, expected, rtol=1e-14, atol=1e-13)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    for m, t in zip(torch.autograd.grad(out, (s, x), grad), torch.autograd.grad(expected, (s, x), grad)):
        torch.testing.assert_close(m, t, rtol=1e-12, atol=1e-12)


def test_in_place_into_a_leaf_requiring_grad_raises_as_torch():
    s, i, x = _scatter_inputs(17, small_index=False)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        sx.scatter_add_(s, 0, i, x)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        s.scatter_add_(0, i, x)


def test_index_add_weighted_in_place():
    s, i, x, w = _weighted_inputs(18, 0)
    base = s.clone()
    assert sx.index_add_weighted_(base, 0, i, x, w) is base
    (mine,) = torch.autograd.grad(base.sum(), (w,))
    torch.testing.assert_close(mine, x.detach().sum(1))


def test_in_place_on_a_leaf_under_no_grad_writes_it():
    leaf = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    with torch.no_grad():
        assert sx.scatter_add_(leaf, 0, torch.tensor([1, 1]), torch.ones(2, dtype=torch.float64)) is leaf
    assert leaf.tolist() == [0.0, 2.0, 0.0]
    assert leaf.requires_grad


def test_under_no_grad_differentiable_ops_record_nothing():
    s, i, x = _scatter_inputs(6)
    with torch.no_grad():
        out = sx.scatter_reduce(s, 0, i, x, "sum")
    assert not out.requires_grad and out.grad_fn is None
    torch.testing.assert_close(out, torch.scatter_reduce(s.detach(), 0, i, x.detach(), "sum"), rtol=0, atol=0)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_non_contiguous_upstream_gradient_and_int32_index(case):
    """The backward receives a transposed gradient (the result is used through .t()), index is int32."""
    op_id, call, inputs, torch_op = case
    s, i, x = inputs(7, small_index=False)
    i32 = i.to(torch.int32)
    out = call(sx, s, i32, x)
    expected = torch_op(s, i, x)
    weight = torch.randn(tuple(reversed(out.shape)), generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    mine = torch.autograd.grad((out.t() * weight).sum(), (s, x), allow_unused=True)
    theirs = torch.autograd.grad((expected.t() * weight).sum(), (s, x), allow_unused=True)
    for m, t in zip(mine, theirs):
        if m is None or t is None:
            assert (m is None or not m.any()) and (t is None or not t.any())
        else:
            torch.testing.assert_close(m, t, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_numpy_index_with_an_input_requiring_grad(case):
    """A numpy index works with torch inputs (the result follows the main input); it must keep working
    when an input requires grad and the call is recorded for autograd."""
    op_id, call, inputs, torch_op = case
    s, i, x = inputs(8, small_index=False)
    out = call(sx, s, i.numpy(), x)
    torch.testing.assert_close(out, torch_op(s, i, x), rtol=1e-14, atol=1e-13)
    mine = torch.autograd.grad(out.sum(), (s, x), allow_unused=True)
    theirs = torch.autograd.grad(torch_op(s, i, x).sum(), (s, x), allow_unused=True)
    for m, t in zip(mine, theirs):
        if m is not None and t is not None:
            torch.testing.assert_close(m, t, rtol=1e-12, atol=1e-12)


# ---- index_add_weighted: input, source and weights ----------------------------------------------------


def _weighted_inputs(seed, dim):
    gen = torch.Generator().manual_seed(seed)
    self_ = torch.randn(5, 3, generator=gen, dtype=torch.float64)
    source = torch.randn(6, 3, generator=gen, dtype=torch.float64)
    weights = torch.rand(6, generator=gen, dtype=torch.float64)
    index = torch.tensor([4, 0, 4, 2, 0, 4])
    if dim == 1:
        self_, source = self_.t().contiguous(), source.t().contiguous()
        index = torch.tensor([2, 0, 2, 1, 0, 2])
    return self_.requires_grad_(), index, source.requires_grad_(), weights.requires_grad_()


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("via", list(VIAS), ids=list(VIAS))
def test_index_add_weighted_gradcheck(via, dim):
    s, i, x, w = _weighted_inputs(11, dim)
    module = VIAS[via]
    assert torch.autograd.gradcheck(lambda s, x, w: module.index_add_weighted(s, dim, i, x, w), (s, x, w),
                                    eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("dim", [0, 1])
def test_index_add_weighted_gradients_match_torch(dim):
    """Against torch.index_add of source scaled by the weights (the MoE combine, whose router trains
    through weights)."""
    s, i, x, w = _weighted_inputs(12, dim)
    out = sx.index_add_weighted(s, dim, i, x, w)
    shape = [1, 1]
    shape[dim] = -1
    expected = torch.index_add(s, dim, i, x * w.view(shape))
    torch.testing.assert_close(out, expected, rtol=1e-14, atol=1e-13)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    for name, m, t in zip(("self", "source", "weights"), torch.autograd.grad(out, (s, x, w), grad),
                          torch.autograd.grad(expected, (s, x, w), grad)):
        torch.testing.assert_close(m, t, rtol=1e-12, atol=1e-12, msg=lambda msg: f"grad of {name}: {msg}")


def test_index_add_weighted_only_weights_require_grad():
    s, i, x, w = _weighted_inputs(13, 0)
    (g,) = torch.autograd.grad(sx.index_add_weighted(s.detach(), 0, i, x.detach(), w).sum(), (w,))
    torch.testing.assert_close(g, x.detach().sum(1))


# ---- helper tensors of the backward passes live on the input's device ----------------------------------

_FACTORIES = {torch.zeros, torch.ones, torch.full, torch.empty, torch.arange, torch.tensor, torch.eye,
              torch.linspace, torch.rand, torch.randn, torch.randint}


class _FactoryCalls(torch.overrides.TorchFunctionMode):
    """Records torch factory calls that name no device (they would make CPU tensors beside CUDA inputs)."""

    def __init__(self):
        super().__init__()
        self.without_device = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _FACTORIES and kwargs.get("device") is None:
            self.without_device.append(func.__name__)
        return func(*args, **kwargs)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_backward_creates_no_tensor_without_a_device(case):
    """Without a GPU: every tensor a backward pass creates must name the input's device (or come from
    new_* / *_like), else the same backward breaks on CUDA tensors. The node's backward is called
    directly, as the autograd engine runs it outside the mode that records the calls."""
    _, call, inputs, _ = case
    s, i, x = inputs(14, small_index=False)
    out = call(sx, s, i, x)
    calls = _FactoryCalls()
    with calls:  # the engine runs backward outside the mode: call the node's backward here
        out.grad_fn.apply(torch.ones_like(out))
    assert calls.without_device == []


def test_the_factory_check_sees_a_backward_that_makes_cpu_tensors(monkeypatch):
    """The check above would have caught the old mean backward (torch.full / torch.ones without device)."""
    def old_style(along, grad, input, src, out, reduce, include_self):
        count = along.add(torch.full(input.shape, 1, dtype=grad.dtype), torch.ones(src.shape, dtype=grad.dtype))
        return grad / count, along.pick(grad / count)

    monkeypatch.setattr(sxt, "_reduce_backward", old_style)
    s, i, x = _scatter_inputs(15, small_index=False)
    out = sx.scatter_reduce(s, 0, i, x, "mean")
    calls = _FactoryCalls()
    with calls:
        out.grad_fn.apply(torch.ones_like(out))
    assert calls.without_device == ["full", "ones"]


def test_index_hit_mask_stays_on_the_inputs_device():
    """The hit mask of the index ops is pure torch: checked on the meta device (no data, no GPU)."""
    input = torch.empty(5, 3, device="meta")
    mask = sxt._Along(0, torch.tensor([4, 0, 4], device="meta"), True).hit(input)
    assert mask.device.type == "meta" and mask.dtype == torch.bool and mask.shape == (5, 1)
    real = sxt._Along(1, torch.tensor([2, 0, 2]), True).hit(torch.empty(5, 3))
    assert real.tolist() == [[True, False, True]]
