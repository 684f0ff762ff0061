"""scatterx.distributed.build_halo / HaloExchange on every rank of `mpirun -n N`: every rank generates the same
graph from a fixed seed and partitions it by the same owner rule, runs the halo exchange on its share, and
compares with the whole graph computed in one process with plain torch (x_ext's rows, mean aggregation,
gradients in float64); the edge partitions (isolated nodes, a rank owning nothing, a rank without edges,
everything on one rank) and the errors, which must raise on every rank."""

import pytest

from conftest import dist, rank_and_size

RANK, WS = rank_and_size()  # (0, 1) without the distributed layer, whose tests the conftest skips

NODES, EDGES, ISOLATED, FEATURES = 40, 150, 3, 4


def _torch():
    return pytest.importorskip("torch", reason="torch not installed")


def graph(seed=0, nodes=NODES, edges=EDGES):
    """Global (edge_index [2, E] int64, x [N, F] float64); the last ISOLATED nodes have no edge."""
    torch = _torch()
    g = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(nodes - ISOLATED, (2, edges), generator=g)
    x = torch.randn(nodes, FEATURES, generator=g, dtype=torch.float64)
    return edge_index, x


def owners(rule, nodes=NODES):
    torch = _torch()
    if rule == "random":
        return torch.randint(WS, (nodes,), generator=torch.Generator().manual_seed(7))
    if rule == "block":
        return torch.arange(nodes) * WS // nodes
    if rule == "last_owns_none":  # the last rank owns no node (at 1 rank: all on rank 0)
        return torch.randint(max(WS - 1, 1), (nodes,), generator=torch.Generator().manual_seed(8))
    if rule == "all_on_0":
        return torch.zeros(nodes, dtype=torch.int64)
    raise AssertionError(rule)


def my_edges(edge_index, node_owner):
    return edge_index[:, node_owner[edge_index[1]] == RANK]


def expected_halo(edge_index, node_owner):
    """The halo's global ids by loops: other ranks' sources of my edges, once each, by (owner, id)."""
    mine = my_edges(edge_index, node_owner)
    needed = {int(s) for s in mine[0] if int(node_owner[s]) != RANK}
    return sorted(needed, key=lambda n: (int(node_owner[n]), n))


def mean_aggregate(x, edge_index, nodes):
    """Plain torch: out[n] = mean of x[src] over the edges into n (0 without edges)."""
    torch = _torch()
    out = torch.zeros((nodes,) + x.shape[1:], dtype=x.dtype)
    out.index_add_(0, edge_index[1], x[edge_index[0]])
    count = torch.bincount(edge_index[1], minlength=nodes).clamp(min=1).to(x.dtype)
    return out / count.reshape([-1] + [1] * (x.dim() - 1))


def build(rule, edge_index=None, x=None, index_dtype=None):
    """(halo, x_local, global edge_index, global x, node_owner) for this rank."""
    if edge_index is None:
        edge_index, x = graph()
    node_owner = owners(rule, x.shape[0])
    mine = my_edges(edge_index, node_owner)
    halo = dist.build_halo(mine if index_dtype is None else mine.to(index_dtype), node_owner)
    return halo, x[halo.local_nodes], edge_index, x, node_owner


@pytest.mark.parametrize("rule", ["random", "block", "last_owns_none", "all_on_0"])
def test_layout_matches_the_global_graph(rule):
    torch = _torch()
    halo, x_local, edge_index, x, node_owner = build(rule)
    assert halo.local_nodes.tolist() == [n for n in range(NODES) if int(node_owner[n]) == RANK]
    assert halo.halo_nodes.tolist() == expected_halo(edge_index, node_owner)
    assert (halo.num_local, halo.num_halo) == (len(halo.local_nodes), len(halo.halo_nodes))
    assert halo.recv_counts == [sum(int(node_owner[n]) == r for n in halo.halo_nodes) for r in range(WS)]
    assert halo.recv_counts[RANK] == 0 and halo.send_counts[RANK] == 0
    x_ext = halo(x_local)
    assert torch.equal(x_ext, x[torch.cat([halo.local_nodes, halo.halo_nodes])])
    # local_edge_index names the same edges, in the same order, as the global ids
    ext_ids = torch.cat([halo.local_nodes, halo.halo_nodes])
    mine = my_edges(edge_index, node_owner)
    assert torch.equal(ext_ids[halo.local_edge_index[0]], mine[0])
    assert torch.equal(halo.local_nodes[halo.local_edge_index[1]], mine[1])
    sent, received = halo.bytes_per_call(x_local)
    assert (sent, received) == (sum(halo.send_counts) * FEATURES * 8, halo.num_halo * FEATURES * 8)


def _sage_mean(halo, x_local):
    import scatterx

    src, dst = halo.local_edge_index
    return scatterx.gather_scatter(halo(x_local), src, dst, "mean", dim_size=halo.num_local)


@pytest.mark.parametrize("rule", ["random", "block", "last_owns_none", "all_on_0"])
def test_aggregation_and_gradients_match_one_process(rule):
    torch = _torch()
    halo, x_local, edge_index, x, node_owner = build(rule)
    w = torch.randn(NODES, FEATURES, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    x_local.requires_grad_()
    h = _sage_mean(halo, x_local)
    ((w[halo.local_nodes] * h).sum()).backward()

    xg = x.clone().requires_grad_()
    hg = mean_aggregate(xg, edge_index, NODES)
    (w * hg).sum().backward()
    torch.testing.assert_close(h.detach(), hg.detach()[halo.local_nodes], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(x_local.grad, xg.grad[halo.local_nodes], rtol=1e-12, atol=1e-12)
    isolated = (halo.local_nodes >= NODES - ISOLATED).nonzero().flatten()
    assert torch.equal(h.detach()[isolated], torch.zeros(len(isolated), FEATURES, dtype=torch.float64))
    assert torch.equal(x_local.grad[isolated], torch.zeros(len(isolated), FEATURES, dtype=torch.float64))

    # Deterministic: the same call again gives the same bits.
    first = x_local.grad.clone()
    x_local.grad = None
    ((w[halo.local_nodes] * _sage_mean(halo, x_local)).sum()).backward()
    assert torch.equal(x_local.grad, first)


def test_a_rank_without_edges_still_sends_its_rows():
    """Rank 0 keeps its nodes but no edge ends there (the graph drops them): it sends, never receives."""
    torch = _torch()
    edge_index, x = graph(seed=1)
    node_owner = owners("random")
    edge_index = edge_index[:, node_owner[edge_index[1]] != 0]
    halo, x_local, _, _, _ = build("random", edge_index, x)
    if RANK == 0:
        assert halo.local_edge_index.shape == (2, 0) and halo.num_halo == 0
    x_local.requires_grad_()
    h = _sage_mean(halo, x_local)
    h.sum().backward()
    xg = x.clone().requires_grad_()
    mean_aggregate(xg, edge_index, NODES).sum().backward()
    torch.testing.assert_close(x_local.grad, xg.grad[halo.local_nodes], rtol=1e-12, atol=1e-12)


def test_a_subgroup_numbers_owners_by_group_rank():
    """Over the ranks 1 .. WS - 1, node_owner holds group ranks; rank 0, outside the group, is refused."""
    torch = _torch()
    if WS == 1:
        pytest.skip("needs a rank outside the group")
    sub = dist.new_group(list(range(1, WS)))
    size, me = WS - 1, RANK - 1
    edge_index, x = graph(seed=5)
    node_owner = torch.arange(NODES) % size
    if RANK == 0:
        with pytest.raises(ValueError, match="build_halo: expected a group this rank is a member of"):
            dist.build_halo(edge_index[:, :0], node_owner, group=sub)
        return
    halo = dist.build_halo(edge_index[:, node_owner[edge_index[1]] == me], node_owner, group=sub)
    assert halo.local_nodes.tolist() == list(range(me, NODES, size))
    x_local = x[halo.local_nodes].requires_grad_()
    _sage_mean(halo, x_local).sum().backward()
    xg = x.clone().requires_grad_()
    mean_aggregate(xg, edge_index, NODES).sum().backward()
    torch.testing.assert_close(x_local.grad, xg.grad[halo.local_nodes], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "int32"])
@pytest.mark.parametrize("shape", [(), (2, 3)])
def test_dtypes_and_row_shapes(dtype, shape):
    """Rows of any dtype and trailing shape (1-d x too) arrive bit for bit; int32 edge_index keeps its dtype."""
    torch = _torch()
    edge_index, _ = graph(seed=2)
    x = (torch.randn((NODES,) + shape, generator=torch.Generator().manual_seed(4)) * 10).to(getattr(torch, dtype))
    halo, x_local, _, _, _ = build("random", edge_index, x, index_dtype=torch.int32)
    assert halo.local_edge_index.dtype == torch.int32
    x_ext = halo(x_local)
    assert x_ext.dtype == x.dtype
    assert torch.equal(x_ext, x[torch.cat([halo.local_nodes, halo.halo_nodes])])
    if dtype != "int32":
        x_local = x_local.clone().requires_grad_()
        halo(x_local).sum().backward()  # each row's gradient: 1 + the ranks that received it
        times = 1 + torch.bincount(halo.send_index, minlength=halo.num_local)
        want = times.reshape([-1] + [1] * len(shape)).expand(x_local.shape).to(x.dtype)
        assert torch.equal(x_local.grad, want)


def test_strided_input_gives_the_contiguous_result():
    torch = _torch()
    halo, x_local, _, _, _ = build("random")
    strided = x_local.t().contiguous().t()
    assert not strided.is_contiguous()
    assert torch.equal(halo(strided), halo(x_local))


def test_wrong_destination_raises_on_every_rank():
    torch = _torch()
    edge_index, _ = graph()
    node_owner = owners("block")
    mine = my_edges(edge_index, node_owner)
    if RANK == WS - 1:
        foreign = int((node_owner != RANK).nonzero()[0]) if WS > 1 else None
        if foreign is None:
            mine = torch.tensor([[0], [NODES]])
            with pytest.raises(IndexError, match=rf"build_halo: expected edge_index values in \[0, {NODES}\)"):
                dist.build_halo(mine, node_owner)
            return
        mine = torch.cat([mine, torch.tensor([[0], [foreign]])], 1)
        with pytest.raises(ValueError, match=rf"build_halo: expected every destination in edge_index\[1\] to be "
                                             rf"owned by this rank \({RANK}\), got node {foreign}"):
            dist.build_halo(mine, node_owner)
    else:
        with pytest.raises(dist.MismatchError, match=rf"build_halo: rank\(s\) \[{WS - 1}\] of the group rejected"):
            dist.build_halo(mine, node_owner)


def test_argument_errors_name_the_argument():
    """Every rank passes the same wrong argument: each raises its own error."""
    torch = _torch()
    edge_index, _ = graph()
    node_owner = owners("block")
    mine = my_edges(edge_index, node_owner)
    with pytest.raises(TypeError, match="build_halo: expected edge_index to be int32 or int64, got torch.float32"):
        dist.build_halo(mine.float(), node_owner)
    with pytest.raises(ValueError, match=r"build_halo: expected edge_index of shape \[2, E_local\], got \[3, "):
        dist.build_halo(torch.cat([mine, mine[:1]]), node_owner)
    with pytest.raises(IndexError, match=rf"build_halo: expected node_owner values in \[0, {WS}\) \(the group's "
                                         rf"ranks\), got {WS}"):
        dist.build_halo(mine, torch.full((NODES,), WS))
    with pytest.raises(TypeError, match="build_halo: expected node_owner to be a 1-d integer tensor"):
        dist.build_halo(mine, node_owner.double())
    with pytest.raises(TypeError, match="build_halo: expected node_owner to be a torch tensor, got list"):
        dist.build_halo(mine, node_owner.tolist())


def test_disagreeing_node_owner_raises_on_every_rank():
    torch = _torch()
    if WS == 1:
        pytest.skip("needs two ranks to disagree")
    node_owner = owners("block")
    longer = torch.cat([node_owner, torch.tensor([0])])
    mine = torch.empty(2, 0, dtype=torch.int64)
    with pytest.raises(dist.MismatchError, match=rf"build_halo: expected node_owner of one length on every rank, "
                                                 rf"got {NODES} nodes on rank 0 and {NODES + 1} on rank {WS - 1}"):
        dist.build_halo(mine, longer if RANK == WS - 1 else node_owner)
    changed = node_owner.clone()
    changed[0] = WS - 1
    with pytest.raises(dist.MismatchError, match=rf"build_halo: expected the same node_owner on every rank, got "
                                                 rf"different values on rank 0 and rank {WS - 1}"):
        dist.build_halo(mine, changed if RANK == WS - 1 else node_owner)


def test_call_errors_raise_on_every_rank_and_leave_the_halo_usable():
    torch = _torch()
    halo, x_local, _, x, _ = build("random")
    last = RANK == WS - 1
    if last:
        with pytest.raises(ValueError, match=rf"HaloExchange: expected x_local with num_local = {halo.num_local} "
                                             rf"rows \(one per owned node\), got shape \[{halo.num_local + 1}, "):
            halo(torch.cat([x_local, x_local[:1] if halo.num_local else x[:1]]))
    else:
        with pytest.raises(dist.MismatchError, match=rf"HaloExchange: all_to_all_v: rank {WS - 1} of {WS} rejected"):
            halo(x_local)
    if WS > 1:
        with pytest.raises(dist.MismatchError, match="HaloExchange: all_to_all_v: ranks disagree on the shape of a "
                                                     "row"):
            halo(x_local[:, :2] if last else x_local)
        with pytest.raises(dist.MismatchError, match="HaloExchange: all_to_all_v: ranks disagree on input's dtype"):
            halo(x_local.float() if last else x_local)
    assert torch.equal(halo(x_local), x[torch.cat([halo.local_nodes, halo.halo_nodes])])
