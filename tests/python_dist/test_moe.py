"""scatterx.distributed.moe on every rank of `mpirun -n N`: dispatch + linear experts + combine against the
same layer computed densely on one process in float64 (every rank builds every rank's tokens and routing
and keeps its own share), with plain Python loops for the routing (recv_x's order, capacity, padding);
gradients in x, the router weights and the experts' parameters; the edge cases and the cross-rank errors."""

import math

import pytest

from conftest import dist, rank_and_size

RANK, WS = rank_and_size()  # (0, 1) without the distributed layer, whose tests the conftest skips

HIDDEN = 5


def _torch():
    return pytest.importorskip("torch", reason="torch not installed")


def routing(q, tokens, k, experts, skew):
    """Rank q's (x, topk_idx, topk_weights), float64, seeded by rank. skew: 'random', 'one' (every token to
    expert 0 first), 'hot' (experts of rank 0 chosen far more often)."""
    torch = _torch()
    g = torch.Generator().manual_seed(100 + q)
    x = torch.randn(tokens, HIDDEN, generator=g, dtype=torch.float64)
    rows = []
    for _ in range(tokens):
        perm = torch.randperm(experts, generator=g)
        if skew == "one":
            perm = torch.cat([torch.tensor([0]), perm[perm != 0]])
        elif skew == "hot":
            hot = experts // WS
            perm = torch.cat([perm[perm < hot], perm[perm >= hot]]) if torch.rand(1, generator=g) < 0.8 else perm
        rows.append(perm[:k])
    idx = torch.stack(rows) if rows else torch.empty(0, k, dtype=torch.int64)
    w = torch.rand(tokens, k, generator=g, dtype=torch.float64)
    return x, idx, w


def expert_weights(experts):
    torch = _torch()
    g = torch.Generator().manual_seed(5)
    return [torch.randn(HIDDEN, HIDDEN, generator=g, dtype=torch.float64) / HIDDEN for _ in range(experts)]


def kept_pairs(idx, experts, capacity_factor):
    """{(t, j)} kept: per expert, the first ceil(cf * T * k / E) pairs in token-then-slot order."""
    tokens, k = idx.shape
    if capacity_factor is None:
        return {(t, j) for t in range(tokens) for j in range(k)}
    capacity = math.ceil(capacity_factor * tokens * k / experts)
    taken, kept = {}, set()
    for t in range(tokens):
        for j in range(k):
            e = int(idx[t, j])
            if taken.get(e, 0) < capacity:
                taken[e] = taken.get(e, 0) + 1
                kept.add((t, j))
    return kept


def expected_recv(all_routing, experts, capacity_factor, pad):
    """This rank's recv_x and tokens_per_expert by loops: local expert, then source rank, then token."""
    torch = _torch()
    local = experts // WS
    rows, sizes = [], []
    for e in range(local):
        g = RANK * local + e
        group = []
        for q, (x, idx, _) in enumerate(all_routing):
            kept = kept_pairs(idx, experts, capacity_factor)
            for t in range(x.shape[0]):
                if any(int(idx[t, j]) == g and (t, j) in kept for j in range(idx.shape[1])):
                    group.append(x[t])
        n = len(group)
        padded = (n + pad - 1) // pad * pad
        group += [torch.zeros(HIDDEN, dtype=torch.float64)] * (padded - n)
        rows += group
        sizes.append(padded)
    recv = torch.stack(rows) if rows else torch.empty(0, HIDDEN, dtype=torch.float64)
    return recv, sizes


def run_layer(mine, params, experts, **options):
    """dispatch, each local expert a linear map over its group of recv_x, combine."""
    torch = _torch()
    from scatterx.distributed import moe

    x, idx, w = mine
    recv_x, sizes, handle = moe.dispatch(x, idx, w, experts, **options)
    local = experts // WS
    pieces = torch.split(recv_x, sizes.tolist())
    out = torch.cat([pieces[e] @ params[RANK * local + e] for e in range(local)]) if local else recv_x
    return moe.combine(out, handle), recv_x, sizes, handle


def dense_layer(all_routing, params, experts, capacity_factor):
    """Every rank's y from one process: y[t] = sum over kept (t, j) of w[t, j] * x[t] @ W[idx[t, j]]."""
    torch = _torch()
    ys = []
    for x, idx, w in all_routing:
        kept = kept_pairs(idx, experts, capacity_factor)
        y = torch.zeros(x.shape[0], HIDDEN, dtype=torch.float64)
        for t in range(x.shape[0]):
            for j in range(idx.shape[1]):
                if (t, j) in kept:
                    y[t] = y[t] + w[t, j] * (x[t] @ params[int(idx[t, j])])
        ys.append(y)
    return ys


def loss_weights(q, tokens):
    torch = _torch()
    g = torch.Generator().manual_seed(900 + q)
    return torch.randn(tokens, HIDDEN, generator=g, dtype=torch.float64)


SETUPS = [
    pytest.param(dict(tokens=7, k=2, per_rank=2, skew="random", cf=None, pad=1), id="top2"),
    pytest.param(dict(tokens=6, k=1, per_rank=3, skew="random", cf=None, pad=1), id="top1"),
    pytest.param(dict(tokens=9, k=3, per_rank=3, skew="hot", cf=None, pad=4), id="top3-hot-padded"),
    pytest.param(dict(tokens=8, k=1, per_rank=1, skew="one", cf=None, pad=1), id="all-to-expert-0"),
    pytest.param(dict(tokens=10, k=2, per_rank=2, skew="hot", cf=0.5, pad=2), id="capacity"),
    pytest.param(dict(tokens="rank1-empty", k=2, per_rank=2, skew="random", cf=None, pad=1), id="T0-on-rank-1"),
]


def tokens_of(q, setup):
    return (0 if q == 1 else 5) if setup["tokens"] == "rank1-empty" else setup["tokens"]


@pytest.mark.parametrize("setup", SETUPS)
def test_layer_matches_the_dense_computation(setup):
    torch = _torch()
    experts = setup["per_rank"] * WS
    everyone = [routing(q, tokens_of(q, setup), setup["k"], experts, setup["skew"]) for q in range(WS)]
    options = dict(capacity_factor=setup["cf"], pad_to_multiple=setup["pad"])

    params = [p.clone().requires_grad_() for p in expert_weights(experts)]
    mine = [t.clone().requires_grad_(t.is_floating_point()) for t in everyone[RANK]]
    y, recv_x, sizes, handle = run_layer(mine, params, experts, **options)
    (y * loss_weights(RANK, y.shape[0])).sum().backward()

    dense_params = [p.clone().requires_grad_() for p in expert_weights(experts)]
    dense_in = [[t.clone().requires_grad_(t.is_floating_point()) for t in r] for r in everyone]
    ys = dense_layer(dense_in, dense_params, experts, setup["cf"])
    sum((yq * loss_weights(q, yq.shape[0])).sum() for q, yq in enumerate(ys)).backward()

    want_recv, want_sizes = expected_recv(everyone, experts, setup["cf"], setup["pad"])
    assert torch.equal(recv_x, want_recv)
    assert sizes.tolist() == want_sizes
    torch.testing.assert_close(y, ys[RANK], rtol=1e-12, atol=1e-12)
    zero = torch.zeros_like
    for i in (0, 2):  # x and topk_weights (the dense side leaves an input no token used without a gradient)
        want = dense_in[RANK][i].grad if dense_in[RANK][i].grad is not None else zero(dense_in[RANK][i])
        torch.testing.assert_close(mine[i].grad, want, rtol=1e-12, atol=1e-12)
    local = experts // WS
    for e in range(experts):  # an expert's parameters get their gradient on the rank that owns them
        got = params[e].grad if params[e].grad is not None else zero(params[e])
        want = dense_params[e].grad if dense_params[e].grad is not None else zero(dense_params[e])
        if e // local == RANK:
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
        else:
            assert params[e].grad is None
    # One copy of a token per destination rank on the wire.
    x, idx, _ = everyone[RANK]
    kept = kept_pairs(idx, experts, setup["cf"])
    pairs = {(int(idx[t, j]) // local, t) for t in range(x.shape[0]) for j in range(idx.shape[1]) if (t, j) in kept}
    assert sum(handle.send_splits) == len(pairs)
    assert handle.send_splits == [sum(1 for d, _ in pairs if d == r) for r in range(WS)]


def test_two_runs_are_bit_identical():
    torch = _torch()
    experts = 2 * WS
    everyone = [routing(q, 12, 2, experts, "hot") for q in range(WS)]
    results = []
    for _ in range(2):
        params = [p.clone().requires_grad_() for p in expert_weights(experts)]
        mine = [t.clone().requires_grad_(t.is_floating_point()) for t in everyone[RANK]]
        y, _, _, _ = run_layer(mine, params, experts, pad_to_multiple=2)
        (y * loss_weights(RANK, y.shape[0])).sum().backward()
        results.append([y.detach(), mine[0].grad, mine[2].grad])
    for a, b in zip(*results):
        assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_low_precision_tokens(dtype):
    torch = _torch()
    from scatterx.distributed import moe

    experts = 2 * WS
    x, idx, w = routing(RANK, 6, 2, experts, "random")
    x = x.to(getattr(torch, dtype))
    recv_x, sizes, handle = moe.dispatch(x, idx, w.float(), experts)
    y = moe.combine(recv_x, handle)  # identity experts: y = x * (sum of the weights)
    assert y.dtype == x.dtype
    want = x.double() * w.to(x.dtype).double().sum(1, keepdim=True)
    tol = 2e-2 if dtype == "bfloat16" else 1e-5
    torch.testing.assert_close(y.double(), want, rtol=tol, atol=tol)


def test_duplicate_experts_raise_on_every_rank():
    torch = _torch()
    from scatterx.distributed import moe

    experts = 2 * WS
    x, idx, w = routing(RANK, 4, 2, experts, "random")
    if RANK == WS - 1:
        idx[2] = torch.tensor([1, 1])
        with pytest.raises(ValueError, match=r"moe.dispatch: expected distinct experts in each row of topk_idx, "
                                             r"got row 2 = \[1, 1\]"):
            moe.dispatch(x, idx, w, experts)
    else:
        with pytest.raises(dist.MismatchError, match=rf"moe.dispatch: rank\(s\) \[{WS - 1}\] of the group failed"):
            moe.dispatch(x, idx, w, experts)


def test_disagreeing_num_experts_raise_on_every_rank():
    from scatterx.distributed import moe

    if WS == 1:
        pytest.skip("needs two ranks to disagree")
    experts = 2 * WS if RANK == 0 else 4 * WS
    x, idx, w = routing(RANK, 4, 2, 2 * WS, "random")
    with pytest.raises(dist.MismatchError, match="moe.dispatch: expected every rank to use the same num_experts"):
        moe.dispatch(x, idx, w, experts)


def test_argument_errors_name_the_argument():
    torch = _torch()
    from scatterx.distributed import moe

    experts = 2 * WS
    x, idx, w = routing(RANK, 4, 2, experts, "random")
    with pytest.raises(IndexError, match=rf"moe.dispatch: expected topk_idx values in \[0, {experts}\), got {experts}"):
        moe.dispatch(x, torch.full_like(idx, experts), w, experts)
    with pytest.raises(ValueError, match="moe.dispatch: expected topk_weights of topk_idx's shape"):
        moe.dispatch(x, idx, w[:, :1], experts)
    with pytest.raises(ValueError, match="moe.dispatch: expected num_experts to be a positive multiple"):
        moe.dispatch(x, idx, w, experts + 1 if WS > 1 else 0)
    recv_x, _, handle = moe.dispatch(x, idx, w, experts)
    with pytest.raises(ValueError, match="moe.combine: expected expert_out of recv_x's shape"):
        moe.combine(recv_x[:, :2], handle)
    moe.combine(recv_x, handle)  # the handle is still usable: every rank completes the pair


def test_strided_inputs_and_int32_ids_match_the_contiguous_call():
    """The C++ path reads x, topk_idx and topk_weights through their strides (no copies): a transposed x,
    int32 ids and a strided weights tensor give the same bits, and the same gradients, as contiguous
    int64 inputs."""
    torch = _torch()
    from scatterx.distributed import moe

    experts = 2 * WS
    x, idx, w = routing(RANK, 7, 2, experts, "hot")
    results = []
    for strided in (False, True):
        xs = x.t().contiguous().t() if strided else x.clone()
        ws = torch.stack([w, w], 2)[:, :, 0] if strided else w.clone()
        ids = idx.to(torch.int32) if strided else idx
        xs.requires_grad_()
        ws.requires_grad_()
        recv_x, _, handle = moe.dispatch(xs, ids, ws, experts, pad_to_multiple=3)
        y = moe.combine(recv_x * 2, handle)
        (y * loss_weights(RANK, y.shape[0])).sum().backward()
        results.append([recv_x.detach(), y.detach(), xs.grad, ws.grad])
    for a, b in zip(*results):
        assert torch.equal(a, b)
