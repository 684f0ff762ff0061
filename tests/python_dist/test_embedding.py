"""scatterx.distributed.ShardedEmbeddingBag on every rank of `mpirun -n N` against torch's embedding_bag over
the full table on one process: every rank builds the same table and every rank's bags (seeded by rank) and
checks its pooled rows, its shard of the table's gradient (the sum over every rank's bags), the per-sample
weights' gradient and one optimizer step; the edge cases and the cross-rank errors."""

import pytest

from conftest import dist, rank_and_size

RANK, WS = rank_and_size()  # (0, 1) without the distributed layer, whose tests the conftest skips

ROWS, DIM = 29, 5  # 29 rows: uneven blocks at 2, 3 and 4 ranks


def _torch():
    return pytest.importorskip("torch", reason="torch not installed")


def table(dtype, rows=ROWS):
    torch = _torch()
    return torch.randn(rows, DIM, generator=torch.Generator().manual_seed(3), dtype=torch.float64).to(dtype)


def batch(q, ids="uniform", rows=ROWS, weighted=False, dtype=None):
    """Rank q's (input, offsets, per_sample_weights or None, grad_out): 5 + q bags of 0..7 ids, bag 1 empty;
    ids uniform or Zipf-skewed (row 0 most frequent: many duplicates)."""
    torch = _torch()
    dtype = dtype or torch.float64
    g = torch.Generator().manual_seed(50 + q)
    lengths = torch.randint(0, 8, (5 + q,), generator=g)
    lengths[1] = 0
    n = int(lengths.sum())
    if ids == "zipf":
        p = 1.0 / torch.arange(1, rows + 1, dtype=torch.float64) ** 1.3
        x = torch.multinomial(p, n, replacement=True, generator=g)
    else:
        x = torch.randint(0, rows, (n,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)[:-1]])
    w = torch.rand(n, generator=g, dtype=torch.float64).to(dtype) if weighted else None
    grad = torch.randn(len(lengths), DIM, generator=g, dtype=torch.float64).to(dtype)
    return x, offsets, w, grad


def reference(full, mode, batches):
    """(this rank's output, the full table's gradient, this rank's per-sample weights' gradient)."""
    torch = _torch()
    weight = full.clone().requires_grad_(True)
    mine = gw = None
    for q, (x, offsets, w, grad) in enumerate(batches):
        w = None if w is None else w.clone().requires_grad_(True)
        out = torch.nn.functional.embedding_bag(x, weight, offsets, mode=mode, per_sample_weights=w)
        (out * grad).sum().backward()
        if q == RANK:
            mine, gw = out.detach(), None if w is None else w.grad
    return mine, weight.grad, gw


def tol(dtype):
    torch = _torch()
    return dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-12)


def run_case(mode, dtype, ids, sharding="row", weighted=False, rows=ROWS):
    torch = _torch()
    full = table(dtype, rows)
    batches = [batch(q, ids, rows, weighted, dtype) for q in range(WS)]
    want, want_grad, want_gw = reference(full, mode, batches)
    bag = dist.ShardedEmbeddingBag.from_pretrained(full, freeze=False, mode=mode, sharding=sharding,
                                                   owner=WS - 1)
    lo, hi = bag.shard_range
    x, offsets, w, grad = batches[RANK]
    w = None if w is None else w.clone().requires_grad_(True)
    out = bag(x, offsets, per_sample_weights=w)
    torch.testing.assert_close(out, want, **tol(dtype))
    (out * grad).sum().backward()
    torch.testing.assert_close(bag.weight.grad, want_grad[lo:hi], **tol(dtype))
    if weighted:
        torch.testing.assert_close(w.grad, want_gw, **tol(dtype))
    return bag, full, want_grad


@pytest.mark.parametrize("ids", ["uniform", "zipf"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_row_wise_matches_torch(mode, dtype, ids):
    torch = _torch()
    bag, full, want_grad = run_case(mode, getattr(torch, dtype), ids)
    lo, hi = bag.shard_range
    bag.sgd_step(0.5)  # the fused step from the sparse gradient == torch's SGD on the full table
    torch.testing.assert_close(bag.weight.detach(), (full - 0.5 * want_grad)[lo:hi], **tol(full.dtype))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_table_wise_matches_torch(mode):
    torch = _torch()
    bag, _, _ = run_case(mode, torch.float64, "zipf", sharding="table")
    assert bag.shard_range == ((0, 0) if RANK != WS - 1 else (0, ROWS))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_per_sample_weights(dtype):
    torch = _torch()
    run_case("sum", getattr(torch, dtype), "zipf", weighted=True)


def test_fewer_rows_than_ranks():
    torch = _torch()
    run_case("mean", torch.float64, "uniform", rows=3)  # at 4 ranks the last shard is empty


def test_shards_on_huge_pages_match_torch():
    """Shards of 4 MiB and more are advised onto huge pages before they are filled: results as before, for the
    pretrained copy and the randomly initialised shard alike."""
    torch = _torch()
    bag, _, _ = run_case("sum", torch.float64, "uniform", rows=1 << 19)  # 5 MiB shards at 4 ranks
    assert bag.weight.is_contiguous() and bag.weight.shape == (bag.shard_range[1] - bag.shard_range[0], DIM)
    fresh = dist.ShardedEmbeddingBag(1 << 19, DIM, "sum", dtype=torch.float64)
    assert fresh.weight.is_contiguous() and torch.isfinite(fresh.weight).all() and fresh.weight.std() > 0.5


def test_two_d_input_and_empty_batch():
    torch = _torch()
    full = table(torch.float64)
    bag = dist.ShardedEmbeddingBag.from_pretrained(full, mode="mean")
    x = torch.randint(0, ROWS, (4, 3), generator=torch.Generator().manual_seed(RANK))
    torch.testing.assert_close(bag(x), torch.nn.functional.embedding_bag(x, full, mode="mean"))
    empty = torch.empty(0, dtype=torch.int64)
    assert bag(empty, empty).shape == (0, DIM)  # every rank, no bags


def test_adagrad_step_and_sparse_grad():
    torch = _torch()
    full = table(torch.float64)
    batches = [batch(q, "zipf") for q in range(WS)]
    _, want_grad, _ = reference(full, "sum", batches)
    ref = full.clone().requires_grad_(True)
    ref.grad = want_grad
    opt = torch.optim.Adagrad([ref], lr=0.1, eps=1e-10)
    opt.step()
    bag = dist.ShardedEmbeddingBag.from_pretrained(full, freeze=False, mode="sum", sparse=True)
    lo, hi = bag.shard_range
    x, offsets, _, grad = batches[RANK]
    (bag(x, offsets) * grad).sum().backward()
    assert bag.weight.grad.is_sparse
    torch.testing.assert_close(bag.weight.grad.to_dense(), want_grad[lo:hi])
    bag.adagrad_step(0.1, eps=1e-10)
    torch.testing.assert_close(bag.weight.detach(), ref.detach()[lo:hi])


def test_sparse_grad_accumulates_like_weight_grad():
    torch = _torch()
    full = table(torch.float64)
    bag = dist.ShardedEmbeddingBag.from_pretrained(full, freeze=False, mode="sum")
    x, offsets, _, grad = batch(RANK, "zipf")
    for _ in range(2):
        (bag(x, offsets) * grad).sum().backward()  # two passes: both summed
    row_ids, rows = bag.sparse_grad
    torch.testing.assert_close(bag.weight.grad[row_ids], rows)
    bag.zero_grad()  # set_to_none: the next pass starts afresh
    (bag(x, offsets) * grad).sum().backward()
    torch.testing.assert_close(bag.sparse_grad[1] * 2, rows)


def test_collection_and_determinism():
    torch = _torch()
    fulls = [table(torch.float32, rows) for rows in (29, 11, 7)]
    coll = dist.ShardedEmbeddingBagCollection.from_pretrained(fulls, sharding="table", mode="sum")
    assert [b.shard_range[1] > b.shard_range[0] for b in coll.bags] == [i % WS == RANK for i in range(3)]
    inputs, offsets = [], []
    for rows in (29, 11, 7):
        x, o, _, _ = batch(RANK, "zipf", rows)
        inputs.append(x)
        offsets.append(o)
    outs = coll(inputs, offsets)
    for out, full, x, o in zip(outs, fulls, inputs, offsets):
        torch.testing.assert_close(out, torch.nn.functional.embedding_bag(x, full, o, mode="sum"))
    again = coll(inputs, offsets)
    assert all(torch.equal(a, b) for a, b in zip(outs, again))  # bit-identical


def test_bad_input_raises_on_every_rank():
    torch = _torch()
    bag = dist.ShardedEmbeddingBag(ROWS, DIM, "sum", dtype=torch.float32)
    bad = RANK == WS - 1
    x = torch.tensor([1, 2, 1234 if bad else 3])
    offsets = torch.tensor([0, 2])
    if bad:
        with pytest.raises(IndexError, match=r"ShardedEmbeddingBag: expected input ids in \[0, 29\), got 1234"):
            bag(x, offsets)
    else:
        with pytest.raises(dist.MismatchError, match="failed their argument checks"):
            bag(x, offsets)
    # A problem only Python sees (offsets with a 2-d input) raises everywhere too.
    x2 = torch.zeros(2, 2, dtype=torch.int64)
    if bad:
        with pytest.raises(ValueError, match="offsets=None with a 2-d input"):
            bag(x2, offsets)
    else:
        with pytest.raises(dist.MismatchError):
            bag(x2.reshape(-1), torch.tensor([0, 2]))
    with pytest.raises(ValueError, match="per_sample_weights only with mode 'sum'"):
        dist.ShardedEmbeddingBag(ROWS, DIM, "max")(x2.reshape(-1), offsets, torch.ones(4))
