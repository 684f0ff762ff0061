"""PyTorch Geometric with scatterx.torch_scatter in torch_scatter's place (issue 15).

The one line, before anything imports torch_geometric:

    sys.modules["torch_scatter"] = scatterx.torch_scatter   # after: import sys, scatterx.torch_scatter

What PyG (checked against torch_geometric 2.8.1) does with torch_scatter, and what this test relies on:

* torch_geometric/typing.py runs ``import torch_scatter`` once, when torch_geometric is imported, and sets
  ``WITH_TORCH_SCATTER = True`` and ``torch_geometric.typing.torch_scatter`` to that module (any ImportError:
  False, and ``torch_scatter = object``). An import statement takes a module from sys.modules, so the line above
  must run before ``import torch_geometric``; later it changes nothing. PyG never touches
  ``torch.ops.torch_scatter.*``, ``torch_scatter.__version__`` or submodules: it calls only the module-level
  functions ``torch_scatter.scatter``, ``torch_scatter.scatter_max`` and ``torch_scatter.segment_csr``, looked up
  as attributes at call time (so counting wrappers set on scatterx.torch_scatter see every call).
* torch_geometric/utils/_scatter.py, ``scatter``: reduce 'sum'/'add'/'mean'/'any' always use torch's
  ``scatter_add_``/``scatter_``; 'min'/'max' go to ``torch_scatter.scatter`` only when src is on CUDA and
  requires grad (else ``torch.scatter_reduce_``); 'mul' only on CUDA. ``scatter_argmax`` (used by nn.models.TGN)
  calls ``torch_scatter.scatter_max`` on every device (checked here on groups with members: for an empty group
  PyG's fallback gives dim_size - 1 and torch_scatter gives src.size(0)).
* torch_geometric/utils/_segment.py, ``segment(src, ptr, reduce)``: ``torch_scatter.segment_csr`` whenever
  WITH_TORCH_SCATTER, on every device, except CUDA 'mean' with a 1-d ptr (torch's ``segment_reduce``); without
  torch_scatter, torch's ``segment_reduce``.
* torch_geometric/nn/aggr/base.py, ``Aggregation.reduce``: ``segment`` when a CSR ``ptr`` is given and (index is
  None or torch.use_deterministic_algorithms(True) was on when the aggregation was built), else ``scatter``.
  nn/conv/message_passing.py passes a ptr only for a torch_sparse SparseTensor or an ``EdgeIndex`` sorted by
  destination (for a plain edge_index tensor and a torch.sparse tensor, ptr is None).
* torch_geometric/utils/_softmax.py, ``softmax`` (GATConv): with a ptr, ``segment(.., 'max')`` and
  ``segment(.., 'sum')``; without, ``scatter`` (the max on ``src.detach()``, so never torch_scatter).
* GCNConv (gcn_conv.py) and GATConv (gat_conv.py) with add_self_loops=True rebuild the edge index, which drops
  the EdgeIndex sort (no ptr); so the routed scenario uses add_self_loops=False on a graph with its self-loops.

Consequences checked below, on CPU: with a plain edge_index tensor PyG calls torch_scatter not at all (GCNConv,
SAGEConv mean/max/min, GATConv); with an EdgeIndex sorted by destination under deterministic algorithms, every
aggregation goes through ``segment_csr`` once (GCNConv sum, SAGEConv mean/max/min) and GATConv calls it three
times (softmax max, softmax sum, aggregation sum); scatter_argmax calls ``scatter_max`` once. On CUDA PyG would
also route scatter min/max/mul with grad through ``torch_scatter.scatter``; test_cuda_gnn.py runs this scenario
on a GPU (``_run(..., device="cuda")``) and checks those calls there.

Each scenario runs in a fresh interpreter (PyG decides at import): once with the line above, once with
``sys.modules["torch_scatter"] = None`` (PyG's pure-torch paths, also where torch_scatter is installed). Forward
outputs and the gradients w.r.t. x and every parameter must match: tightly for sums and means (another order
of additions), exactly for max/min (random float64 features, no duplicate edges, so no ties).
"""

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import TORCH_MISSING

torch = pytest.importorskip("torch", reason=TORCH_MISSING)
# Looked up, not imported: importing torch_geometric patches torch functions in this process (its HashTensor
# replaces torch.index_select, which then refuses 0-d inputs) and would change what other tests see.
if importlib.util.find_spec("torch_geometric") is None:
    pytest.skip("torch_geometric (PyTorch Geometric) not installed", allow_module_level=True)

_SCENARIO = textwrap.dedent(
    r"""
    import collections, sys
    mode, out_path = sys.argv[1], sys.argv[2]
    device = sys.argv[3] if len(sys.argv) > 3 else "cpu"
    counts = collections.Counter()
    if mode == "scatterx":
        import scatterx.torch_scatter
        ts = scatterx.torch_scatter
        for name in ts.__all__:  # count every call PyG makes into scatterx.torch_scatter
            def counted(*args, _f=getattr(ts, name), _name=name, **kwargs):
                counts[_name] += 1
                return _f(*args, **kwargs)
            setattr(ts, name, counted)
        sys.modules["torch_scatter"] = scatterx.torch_scatter  # the user's one line
    else:
        sys.modules["torch_scatter"] = None  # no torch_scatter: PyG's pure-torch paths

    import torch
    import torch_geometric
    import torch_geometric.typing
    from torch_geometric import EdgeIndex
    from torch_geometric.nn import GATConv, GCNConv, SAGEConv

    info = {"with_torch_scatter": torch_geometric.typing.WITH_TORCH_SCATTER,
            "module": getattr(torch_geometric.typing.torch_scatter, "__name__", None)}

    # A random graph: 300 nodes, 250 of them with edges and self-loops, 50 isolated; no duplicate edges.
    N, CONNECTED, F = 300, 250, 16
    g = torch.Generator().manual_seed(15)
    edges = torch.randint(0, CONNECTED, (2, 3000), generator=g)
    loops = torch.arange(CONNECTED).repeat(2, 1)
    edges = torch.cat([edges, loops], 1)
    key = torch.unique(edges[1] * N + edges[0])  # dedupe, sorted by destination
    edge_index = torch.stack([key % N, key // N]).to(device)
    x0 = torch.randn(N, F, generator=g, dtype=torch.float64).to(device)

    def host(t):  # results travel back on the CPU
        return None if t is None else t.detach().cpu()

    def models():
        torch.manual_seed(0)
        return {
            "gcn": GCNConv(F, 8, add_self_loops=False),
            "sage_mean": SAGEConv(F, 8, aggr="mean"),
            "sage_max": SAGEConv(F, 8, aggr="max"),
            "sage_min": SAGEConv(F, 8, aggr="min"),
            "gat": GATConv(F, 8, heads=2, add_self_loops=False),
        }

    results = {}
    for fmt in ["tensor", "edge_index_csc"]:
        if fmt == "edge_index_csc":
            # ptr reaches the aggregations only with an EdgeIndex sorted by destination, and Aggregation.reduce
            # uses it only under deterministic algorithms (read when the module is built). On CUDA only warn:
            # torch has no deterministic form of some CUDA ops these models use.
            torch.use_deterministic_algorithms(True, warn_only=device != "cpu")
            ei = EdgeIndex(edge_index, sparse_size=(N, N), sort_order="col")
        else:
            ei = edge_index
        for name, conv in models().items():
            conv = conv.double().to(device)
            x = x0.clone().requires_grad_(True)
            counts.clear()
            out = conv(x, ei)
            weight = torch.linspace(-1, 1, out.numel(), dtype=out.dtype, device=out.device).view_as(out)
            (out * weight).sum().backward()
            res = {"out": host(out), "grad/x": host(x.grad)}
            for pname, p in conv.named_parameters():
                res["grad/" + pname] = host(p.grad)
            res["calls"] = dict(counts)
            results[fmt + "/" + name] = res
    # scatter_argmax (TGN's helper) on a 1-d src: torch_scatter.scatter_max on every device.
    from torch_geometric.utils._scatter import scatter_argmax
    torch.use_deterministic_algorithms(False)
    src = torch.randn(edge_index.size(1), generator=g, dtype=torch.float64).to(device)
    counts.clear()
    arg = scatter_argmax(src, edge_index[1], dim_size=N)
    results["scatter_argmax"] = {"arg": host(arg[:CONNECTED]), "calls": dict(counts)}  # 250..299: no edges
    torch.save({"info": info, "results": results}, out_path)
    """
)


def _run(mode, tmp_path, device="cpu"):
    """The scenario in a fresh interpreter, its tensors on `device` (test_cuda_gnn runs it on "cuda"); the
    results come back on the CPU."""
    path = str(tmp_path / f"{mode}-{device}.pt")
    env = dict(os.environ)
    env.pop("SCATTERX_TEST_HIDE_TORCH", None)
    env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # cuBLAS under deterministic algorithms (CUDA)
    proc = subprocess.run([sys.executable, "-c", _SCENARIO, mode, path, device], capture_output=True, text=True,
                          env=env, cwd=str(tmp_path), timeout=600)
    assert proc.returncode == 0, f"{mode} scenario on {device} failed:\n{proc.stdout}\n{proc.stderr}"
    return torch.load(path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pyg")
    return _run("scatterx", tmp), _run("torch", tmp)


# Calls into scatterx.torch_scatter per scenario (see the module docstring for why these and only these).
_EXPECTED_CALLS = {
    "tensor/gcn": {}, "tensor/sage_mean": {}, "tensor/sage_max": {}, "tensor/sage_min": {}, "tensor/gat": {},
    "edge_index_csc/gcn": {"segment_csr": 1},
    "edge_index_csc/sage_mean": {"segment_csr": 1},
    "edge_index_csc/sage_max": {"segment_csr": 1},
    "edge_index_csc/sage_min": {"segment_csr": 1},
    "edge_index_csc/gat": {"segment_csr": 3},
    "scatter_argmax": {"scatter_max": 1},
}


def test_pyg_imports_scatterx_as_torch_scatter(runs):
    sx, plain = runs
    assert sx["info"] == {"with_torch_scatter": True, "module": "scatterx.torch_scatter"}
    assert plain["info"]["with_torch_scatter"] is False


@pytest.mark.parametrize("scenario", sorted(_EXPECTED_CALLS))
def test_pyg_calls_scatterx(runs, scenario):
    sx, plain = runs
    assert sx["results"][scenario]["calls"] == _EXPECTED_CALLS[scenario]
    assert plain["results"][scenario]["calls"] == {}


@pytest.mark.parametrize("scenario", sorted(_EXPECTED_CALLS))
def test_pyg_outputs_and_gradients_match(runs, scenario):
    sx, plain = runs[0]["results"][scenario], runs[1]["results"][scenario]
    keys = sorted(k for k in plain if k != "calls")
    assert sorted(k for k in sx if k != "calls") == keys and keys
    exact = scenario.endswith(("_max", "_min", "argmax")) or not _EXPECTED_CALLS[scenario]
    for key in keys:
        a, b = sx[key], plain[key]
        assert a is not None and b is not None, f"{scenario} {key}: no gradient"
        assert a.dtype == (torch.int64 if key == "arg" else torch.float64) and a.shape == b.shape, key
        if exact:  # max/min without ties, or no torch_scatter call at all: the same numbers
            assert torch.equal(a, b), f"{scenario} {key}: max diff {(a - b).abs().max()}"
        else:
            assert torch.allclose(a, b, rtol=1e-12, atol=1e-13), f"{scenario} {key}: max diff {(a - b).abs().max()}"
