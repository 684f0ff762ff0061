"""scatterx.distributed.nn, on every rank of `mpirun -n N`: each differentiable collective's outputs and
gradients against the same computation done densely on one process (every rank builds every rank's
inputs, runs the math with torch's autograd and keeps its own share), and the gradients against central
finite differences of the global loss, one rank's input element perturbed at a time."""

import pytest

from conftest import dist, rank_and_size

RANK, WS = rank_and_size()  # (0, 1) without the distributed layer, whose tests the conftest skips


def _torch():
    return pytest.importorskip("torch", reason="torch not installed")


def rows_to(src, dst):
    """Rows rank src sends rank dst in the variable-split cases (some 0)."""
    return (src + 2 * dst) % 3


def case(name):
    """(inputs(q) -> rank q's list of input tensors, run(inputs) -> outputs on this rank via scatterx.distributed.nn,
    dense(all ranks' inputs) -> every rank's outputs, as tuples). float64, seeded by rank."""
    torch = _torch()
    import scatterx.distributed.nn as sxnn

    def rand(q, *shape, salt=0):
        g = torch.Generator().manual_seed(1000 * q + 17 * salt + len(name))
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    if name.startswith("all_reduce"):
        op = name.split("/")[1]
        reduce = {"sum": lambda xs: sum(xs), "avg": lambda xs: sum(xs) / len(xs),
                  "max": lambda xs: torch.stack(xs).amax(0), "min": lambda xs: torch.stack(xs).amin(0)}[op]
        return ((lambda q: [rand(q, 2, 3)]),
                (lambda x: (sxnn.all_reduce(x[0], op=op.upper()),)),
                (lambda xs: [(reduce([x[0] for x in xs]),) for _ in xs]))
    if name == "broadcast":
        src = WS - 1
        return ((lambda q: [rand(q, 4)]), (lambda x: (sxnn.broadcast(x[0], src),)),
                (lambda xs: [(xs[src][0] * 1,) for _ in xs]))
    if name == "all_gather":
        return ((lambda q: [rand(q, 3)]), (lambda x: sxnn.all_gather(x[0])),
                (lambda xs: [tuple(x[0] * 1 for x in xs) for _ in xs]))
    if name.startswith("reduce_scatter"):
        op = name.split("/")[1]
        scale = 1.0 if op == "sum" else 1.0 / WS
        return ((lambda q: [rand(q, 2, salt=s) for s in range(WS)]),
                (lambda x: (sxnn.reduce_scatter(torch.empty(2, dtype=torch.float64), x, op=op.upper()),)),
                (lambda xs: [(sum(x[r] for x in xs) * scale,) for r in range(len(xs))]))
    if name == "all_to_all":
        # rank q's input s has (q + s + 1) rows, which is what rank s expects from q
        return ((lambda q: [rand(q, q + s + 1, 2, salt=s) for s in range(WS)]),
                (lambda x: sxnn.all_to_all([torch.empty(RANK + s + 1, 2, dtype=torch.float64)
                                            for s in range(WS)], x)),
                (lambda xs: [tuple(xs[s][r] * 1 for s in range(len(xs))) for r in range(len(xs))]))

    if name == "gather":
        dst = WS - 1
        return ((lambda q: [rand(q, 3)]), (lambda x: sxnn.gather(x[0], dst=dst)),
                (lambda xs: [tuple(x[0] * 1 if r == dst else torch.zeros(3, dtype=torch.float64) for x in xs)
                             for r in range(len(xs))]))
    if name == "scatter":
        return ((lambda q: [rand(q, 2, salt=s) for s in range(WS)]), (lambda x: (sxnn.scatter(x, src=0),)),
                (lambda xs: [(xs[0][r] * 1,) for r in range(len(xs))]))
    if name == "reduce":  # off dst the output is the rank's own tensor, with no gradient (torch's rule)
        return ((lambda q: [rand(q, 4)]), (lambda x: (sxnn.reduce(x[0], dst=0),)),
                (lambda xs: [(sum(x[0] for x in xs) if r == 0 else xs[r][0].detach().clone(),)
                             for r in range(len(xs))]))

    def chunks(x, q):  # rank q's rows, cut by destination
        return torch.split(x, [rows_to(q, s) for s in range(WS)])

    if name == "all_to_all_single":
        return ((lambda q: [rand(q, sum(rows_to(q, s) for s in range(WS)), 2)]),
                (lambda x: (sxnn.all_to_all_single(
                    torch.empty(sum(rows_to(s, RANK) for s in range(WS)), 2, dtype=torch.float64), x[0],
                    [rows_to(s, RANK) for s in range(WS)], [rows_to(RANK, s) for s in range(WS)]),)),
                (lambda xs: [(torch.cat([chunks(xs[s][0], s)[r] for s in range(len(xs))]),)
                             for r in range(len(xs))]))
    if name == "all_to_all_v":
        def run(x):
            out, recv = sxnn.all_to_all_v(x[0], [rows_to(RANK, s) for s in range(WS)])
            assert recv == [rows_to(s, RANK) for s in range(WS)]
            return (out,)
        return ((lambda q: [rand(q, sum(rows_to(q, s) for s in range(WS)), 2)]), run,
                (lambda xs: [(torch.cat([chunks(xs[s][0], s)[r] for s in range(len(xs))]),)
                             for r in range(len(xs))]))
    raise AssertionError(name)


CASES = ["all_reduce/sum", "all_reduce/avg", "all_reduce/max", "all_reduce/min", "broadcast", "all_gather",
         "reduce_scatter/sum", "reduce_scatter/avg", "all_to_all", "all_to_all_single", "all_to_all_v", "gather",
         "scatter", "reduce"]
# reduce's outputs off dst are its inputs with the gradient cut (torch's rule), which finite differences of
# the loss do not see: it is checked against the dense computation only.
FD_CASES = [c for c in CASES if c != "reduce"]


def weights(outputs, q):
    """Rank q's loss weights, one tensor per output: the loss is sum over ranks and outputs of <out, w>."""
    torch = _torch()
    g = torch.Generator().manual_seed(7 + q)
    return [torch.randn(o.shape, generator=g, dtype=torch.float64) for o in outputs]


@pytest.mark.parametrize("name", CASES)
def test_matches_the_dense_computation(name):
    torch = _torch()
    inputs, run, dense = case(name)
    mine = [t.requires_grad_() for t in inputs(RANK)]
    out = run(mine)
    sum((o * w).sum() for o, w in zip(out, weights(out, RANK))).backward()

    every = [[t.requires_grad_() for t in inputs(q)] for q in range(WS)]
    outs = dense(every)
    sum((o * w).sum() for q in range(WS) for o, w in zip(outs[q], weights(outs[q], q))).backward()

    assert len(out) == len(outs[RANK])
    for got, want in zip(out, outs[RANK]):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    for got, want in zip(mine, every[RANK]):  # an input no output reads (broadcast's off src) gets zeros
        expected = want.grad if want.grad is not None else torch.zeros_like(want)
        torch.testing.assert_close(got.grad, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", FD_CASES)
def test_gradients_match_finite_differences(name):
    """d(global loss)/d(rank p's element i) by central differences: every rank runs every (p, i) in lockstep,
    only rank p perturbing; rank p compares with its own analytic gradient."""
    torch = _torch()
    inputs, run, _ = case(name)

    def global_loss(xs):
        with torch.no_grad():
            out = run(xs)
            local = sum((o * w).sum() for o, w in zip(out, weights(out, RANK)))
            total = torch.tensor([float(local)], dtype=torch.float64)
            dist.all_reduce(total)
            return float(total[0])

    mine = [t.requires_grad_() for t in inputs(RANK)]
    out = run(mine)
    sum((o * w).sum() for o, w in zip(out, weights(out, RANK))).backward()
    analytic = [t.grad.clone() for t in mine]

    h = 1e-6
    sizes = [[t.numel() for t in inputs(q)] for q in range(WS)]
    failures = []
    for p in range(WS):
        for k, n in enumerate(sizes[p]):
            for i in range(n):
                values = []
                for step in (h, -h):
                    xs = [t.detach().clone() for t in mine]
                    if RANK == p:
                        xs[k].view(-1)[i] += step
                    values.append(global_loss(xs))
                numeric = (values[0] - values[1]) / (2 * h)
                if RANK == p and abs(numeric - float(analytic[k].view(-1)[i])) > 1e-6 * (1 + abs(numeric)):
                    failures.append((k, i, numeric, float(analytic[k].view(-1)[i])))
    assert not failures, failures


def test_outputs_are_new_and_inputs_untouched():
    torch = _torch()
    import scatterx.distributed.nn as sxnn

    x = torch.full((3,), float(RANK + 1), dtype=torch.float64)
    y = sxnn.all_reduce(x)
    assert y.data_ptr() != x.data_ptr()
    assert torch.equal(x, torch.full((3,), float(RANK + 1), dtype=torch.float64))
    assert torch.equal(y, torch.full((3,), WS * (WS + 1) / 2, dtype=torch.float64))


def test_all_reduce_product_has_no_gradient():
    torch = _torch()
    import scatterx.distributed.nn as sxnn

    x = torch.ones(2, dtype=torch.float64, requires_grad=True)
    y = sxnn.all_reduce(x, op=dist.ReduceOp.PRODUCT)
    assert torch.equal(y.detach(), torch.ones(2, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="all_reduce: gradients are defined for op SUM or AVG or MAX or MIN, "
                                           "got ReduceOp.PRODUCT"):
        y.sum().backward()


def test_functional_module_mirrors_torch():
    """The same names and parameters as torch.distributed.nn.functional (torch's defaults group=group.WORLD,
    scatterx's group=None: both mean the default group)."""
    import inspect

    _torch()
    tf = pytest.importorskip("torch.distributed.nn.functional", reason="torch built without distributed")
    import scatterx.distributed.nn as sxnn
    import scatterx.distributed.nn.functional as F

    for name in ("all_gather", "all_reduce", "all_to_all", "all_to_all_single", "broadcast", "gather", "reduce",
                 "reduce_scatter", "scatter"):
        assert getattr(sxnn, name) is getattr(F, name)
        assert list(inspect.signature(getattr(F, name)).parameters) == \
            list(inspect.signature(getattr(tf, name)).parameters), name
