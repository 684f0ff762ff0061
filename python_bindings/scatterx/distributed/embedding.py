"""Sharded embedding bags: :class:`torch.nn.EmbeddingBag` over a table whose rows are spread over the ranks of
a group, and :class:`ShardedEmbeddingBagCollection` for several tables.

Sharding: row-wise (the default), group rank r owns rows ``r*ceil(N/W) .. min((r+1)*ceil(N/W), N) - 1`` (the
last blocks shorter, possibly empty); table-wise, one rank owns the whole table (the collection puts table i
on group rank ``i % W``) and the others hold a [0, D] shard. ``bag.weight`` is the local shard (a Parameter),
``bag.shard_range`` its rows ``(start, stop)``.

Each rank calls ``bag(input, offsets, per_sample_weights)`` with its own batch (torch's conventions: 1-d
input with offsets, or 2-d input [B, L] without) and gets its pooled [B, D] rows. The ids go to the ranks that
own their rows (one variable-split all-to-all), are pooled there into one partial row per (requesting rank,
bag), and the partials come back to be folded: ``mean`` divides by the bag's whole length, ``max`` is exact
(ties to the first id of the bag, as torch), an empty bag gives zeros, duplicate ids count each time. The
backward sends one gradient row per partial to its owner, which folds it into its rows (deterministically:
fixed orders everywhere, bit-identical across runs). The work is done by the C++ layer (dist/embedding_bag.h).

Gradients: ``weight.grad`` is dense (like torch) or, with ``sparse=True``, a coalesced sparse COO tensor
(torch.optim.SGD / Adagrad take either). The same gradient as coalesced rows ``(row_ids, rows)`` is kept in
``bag.sparse_grad`` (summed like ``weight.grad``: over the backward passes since the last step or
``zero_grad()``) for the fused updates
:meth:`ShardedEmbeddingBag.sgd_step` and :meth:`ShardedEmbeddingBag.adagrad_step`, which touch only those rows.

Collective: every rank of the group calls the forward and the backward (``loss.backward()``) in the same order.
Checks: each rank validates its arguments, then the ranks exchange a small record before any id moves; a rank
whose own arguments are wrong raises ValueError, TypeError or IndexError, the others
:class:`scatterx.distributed.MismatchError` naming it; nobody is left waiting.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import weakref
from typing import Any, List, Optional, Sequence, Tuple

import torch

from .. import _C
from ._groups import GroupLike, _resolve

__all__ = ["ShardedEmbeddingBag", "ShardedEmbeddingBagCollection"]

_MODES = {"sum": 0, "mean": 1, "max": 2}
_OP = "ShardedEmbeddingBag"
_HUGE_PAGE = 2 << 20


def _libc_madvise():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        return libc.madvise if hasattr(mmap, "MADV_HUGEPAGE") else None
    except (OSError, AttributeError):
        return None


_madvise = _libc_madvise()


def _new_shard(rows: int, dim: int, dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised [rows, dim] shard whose whole 2 MiB pages are advised (before anything touches them) to be
    transparent huge pages: lookups read random rows, and with 4 KiB pages nearly every row read also misses the
    TLB (a 1M x 128 float32 table: scatterx's pooling ~10% faster; torch's embedding_bag gains too). Advisory:
    where the kernel refuses, the pages stay small."""
    shard = torch.empty(rows, dim, dtype=dtype)
    nbytes = shard.numel() * shard.element_size()
    if _madvise is not None and nbytes >= 2 * _HUGE_PAGE:
        first = -(-shard.data_ptr() // _HUGE_PAGE) * _HUGE_PAGE
        last = (shard.data_ptr() + nbytes) // _HUGE_PAGE * _HUGE_PAGE
        if last > first:
            _madvise(first, last - first, mmap.MADV_HUGEPAGE)
    return shard


class _Bag(torch.autograd.Function):
    """The sharded lookup and pooling; backward sends the gradient to the owners (and, with per-sample weights,
    their gradient back)."""

    @staticmethod
    def forward(ctx, weight, per_sample_weights, input, offsets, row_starts, mode, comm, bag):
        psw = None if per_sample_weights is None else per_sample_weights.detach()
        out, native = _C.dist.embedding_bag_forward(weight.detach(), input, offsets, psw, row_starts, mode, comm,
                                                    _C.Framework.Torch)
        ctx.native, ctx.bag = native, bag  # bag: a weak reference to the module (for its sparse_grad)
        ctx.save_for_backward(weight)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        (weight,) = ctx.saved_tensors
        if ctx.native is None:
            raise RuntimeError(f"{_OP}: backward through the same forward twice (retain_graph) is not supported")
        native, ctx.native = ctx.native, None  # released: a graph kept alive to exit would hold it
        row_ids, rows, grad_psw = _C.dist.embedding_bag_backward(grad_out.contiguous(), weight.detach(), native,
                                                                 bool(ctx.needs_input_grad[1]), _C.Framework.Torch)
        grad_weight = None
        bag = ctx.bag()
        if ctx.needs_input_grad[0] and bag is not None:
            if bag.weight.grad is None:  # zero_grad() (set_to_none) ran: start afresh, as weight.grad does
                bag.sparse_grad = None
            bag._add_sparse_grad(row_ids, rows)
            grad_weight = bag._grad_of(row_ids, rows)
        return grad_weight, grad_psw, None, None, None, None, None, None


def _problem(input, offsets, per_sample_weights) -> Optional[Exception]:
    """What the C++ checks cannot see (non-tensors, devices, the 2-d form); they check the rest."""
    for name, t in (("input", input), ("offsets", offsets), ("per_sample_weights", per_sample_weights)):
        if t is not None and not isinstance(t, torch.Tensor):
            return TypeError(f"{_OP}: expected {name} to be a torch tensor, got {type(t).__name__}")
        if t is not None and t.device.type != "cpu":
            return ValueError(f"{_OP}: expected {name} on the cpu, got {t.device}")
    if input.dim() == 2 and offsets is not None:
        return ValueError(f"{_OP}: expected offsets=None with a 2-d input (as torch), got offsets")
    if input.dim() == 1 and offsets is None:
        return ValueError(f"{_OP}: expected offsets with a 1-d input (as torch), got None")
    if input.dim() not in (1, 2):
        return ValueError(f"{_OP}: expected a 1-d or 2-d input, got shape {list(input.shape)}")
    if per_sample_weights is not None and per_sample_weights.shape != input.shape:
        return ValueError(f"{_OP}: expected per_sample_weights of input's shape {list(input.shape)}, got "
                          f"{list(per_sample_weights.shape)}")
    return None


class ShardedEmbeddingBag(torch.nn.Module):
    """:class:`torch.nn.EmbeddingBag` (num_embeddings x embedding_dim, mode ``"sum"``, ``"mean"`` or ``"max"``)
    sharded over ``group``: row-wise, or with ``sharding="table"`` all rows on group rank ``owner``. The local
    shard is drawn from N(0, 1) like torch's (each rank from its own generator); :meth:`from_pretrained` loads a
    given table. dtype float32 or float64 (default: torch's default dtype)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, mode: str = "mean", *, group: GroupLike = None,
                 dtype: Optional[torch.dtype] = None, sparse: bool = False, sharding: str = "row", owner: int = 0,
                 _weight: Optional[torch.Tensor] = None):
        super().__init__()
        if mode not in _MODES:
            raise ValueError(f"{_OP}: expected mode 'sum', 'mean' or 'max', got {mode!r}")
        if sharding not in ("row", "table"):
            raise ValueError(f"{_OP}: expected sharding 'row' or 'table', got {sharding!r}")
        dtype = torch.get_default_dtype() if dtype is None else dtype
        if dtype not in (torch.float32, torch.float64):
            raise TypeError(f"{_OP}: expected dtype float32 or float64, got {dtype}")
        pg = _resolve(group, _OP)
        if pg is None:
            raise ValueError(f"{_OP}: expected a group this rank is a member of, got one without it")
        self.group, self._pg = group, pg
        comm = pg._live_comm(_OP)
        world, rank = comm.size(), comm.rank()
        if sharding == "row":
            starts = _C.dist.embedding_row_wise_starts(num_embeddings, world)
        else:
            starts = _C.dist.embedding_table_wise_starts(num_embeddings, world, owner)
        self.num_embeddings, self.embedding_dim, self.mode, self.sparse = num_embeddings, embedding_dim, mode, sparse
        self.sharding, self._row_starts = sharding, [int(s) for s in starts]
        self.shard_range: Tuple[int, int] = (self._row_starts[rank], self._row_starts[rank + 1])
        rows = self.shard_range[1] - self.shard_range[0]
        if _weight is None:
            _weight = _new_shard(rows, embedding_dim, dtype).normal_()
        self.weight = torch.nn.Parameter(_weight)
        self.sparse_grad: Optional[Tuple[torch.Tensor, torch.Tensor]] = None
        self.adagrad_state: Optional[torch.Tensor] = None

    @classmethod
    def from_pretrained(cls, embeddings: torch.Tensor, freeze: bool = True, mode: str = "mean", *,
                        group: GroupLike = None, sparse: bool = False, sharding: str = "row",
                        owner: int = 0) -> "ShardedEmbeddingBag":
        """Every rank passes the same full [N, D] table and keeps (a copy of) its shard. ``freeze`` as torch."""
        if not isinstance(embeddings, torch.Tensor) or embeddings.dim() != 2:
            raise ValueError(f"{_OP}.from_pretrained: expected a 2-d table [N, D], got "
                             f"{getattr(embeddings, 'shape', type(embeddings).__name__)}")
        bag = cls(embeddings.shape[0], embeddings.shape[1], mode, group=group, dtype=embeddings.dtype, sparse=sparse,
                  sharding=sharding, owner=owner, _weight=torch.empty(0, embeddings.shape[1], dtype=embeddings.dtype))
        lo, hi = bag.shard_range
        shard = _new_shard(hi - lo, embeddings.shape[1], embeddings.dtype).copy_(embeddings.detach()[lo:hi])
        bag.weight = torch.nn.Parameter(shard, requires_grad=not freeze)
        return bag

    def forward(self, input: torch.Tensor, offsets: Optional[torch.Tensor] = None,
                per_sample_weights: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The pooled [B, D] rows of this rank's bags (torch.nn.EmbeddingBag's arguments)."""
        comm = self._pg._live_comm(_OP)
        problem = _problem(input, offsets, per_sample_weights)
        if problem is not None:
            _C.dist.embedding_failed_checks(comm)  # the peers learn of it and raise MismatchError
            raise problem
        if input.dim() == 2:
            bags, length = input.shape
            offsets = torch.arange(bags, dtype=input.dtype) * length
            input = input.reshape(-1)
            per_sample_weights = None if per_sample_weights is None else per_sample_weights.reshape(-1)
        return _Bag.apply(self.weight, per_sample_weights, input, offsets, self._row_starts, _MODES[self.mode],
                          comm, weakref.ref(self))

    # ---- gradients and fused updates ----

    def _add_sparse_grad(self, row_ids: torch.Tensor, rows: torch.Tensor) -> None:
        if self.sparse_grad is None:
            self.sparse_grad = (row_ids, rows)
            return
        ids = torch.cat([self.sparse_grad[0], row_ids])  # a second backward before a step: coalesce again
        unique, where = torch.unique(ids, sorted=True, return_inverse=True)
        folded = rows.new_zeros(unique.numel(), rows.shape[1]).index_add_(0, where,
                                                                         torch.cat([self.sparse_grad[1], rows]))
        self.sparse_grad = (unique, folded)

    def _grad_of(self, row_ids: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        if self.sparse:
            return torch.sparse_coo_tensor(row_ids[None], rows, tuple(self.weight.shape), is_coalesced=True,
                                           check_invariants=False)
        return _C.dist.embedding_dense_grad(row_ids, rows, self.weight.shape[0], _C.Framework.Torch)

    def _take_sparse_grad(self) -> Tuple[torch.Tensor, torch.Tensor]:
        if self.sparse_grad is None:
            return (torch.empty(0, dtype=torch.int64), self.weight.new_empty(0, self.embedding_dim))
        grad, self.sparse_grad = self.sparse_grad, None
        return grad

    @torch.no_grad()
    def sgd_step(self, lr: float) -> None:
        """``w[rows] -= lr * g`` on the rows of :attr:`sparse_grad` (then cleared); torch.optim.SGD's step."""
        row_ids, rows = self._take_sparse_grad()
        _C.dist.embedding_sgd_update(self.weight.data, row_ids, rows, float(lr))

    @torch.no_grad()
    def adagrad_step(self, lr: float, eps: float = 1e-10, initial_accumulator_value: float = 0.0) -> None:
        """torch.optim.Adagrad's step (no lr decay, no weight decay) on the rows of :attr:`sparse_grad` (then
        cleared): ``s += g * g; w -= lr * g / (sqrt(s) + eps)``, the state ``s`` in :attr:`adagrad_state`."""
        if self.adagrad_state is None:
            self.adagrad_state = torch.full_like(self.weight.data, float(initial_accumulator_value))
        row_ids, rows = self._take_sparse_grad()
        _C.dist.embedding_adagrad_update(self.weight.data, self.adagrad_state, row_ids, rows, float(lr), float(eps))

    def extra_repr(self) -> str:
        return (f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}, sharding={self.sharding!r}, "
                f"shard_range={self.shard_range}")


class ShardedEmbeddingBagCollection(torch.nn.Module):
    """Several embedding bags, ``tables`` a sequence of (num_embeddings, embedding_dim). ``sharding="table"``
    (the default) puts table i whole on group rank ``i % W``; ``sharding="row"`` shards every table row-wise.
    ``forward(inputs, offsets=None, per_sample_weights=None)`` takes one input (and offsets, weights) per table
    and returns the list of pooled [B, D_i] outputs; each table is one sharded lookup, in table order. The
    counterpart of torchrec.EmbeddingBagCollection (a list of tensors in place of its KeyedJaggedTensor);
    each table behaves as :class:`ShardedEmbeddingBag`: dtypes, determinism and errors as there."""

    def __init__(self, tables: Sequence[Tuple[int, int]], *, sharding: str = "table", mode: str = "mean",
                 group: GroupLike = None, dtype: Optional[torch.dtype] = None, sparse: bool = False,
                 _weights: Optional[Sequence[torch.Tensor]] = None):
        super().__init__()
        pg = _resolve(group, "ShardedEmbeddingBagCollection")
        world = 1 if pg is None else pg.size()
        bags: List[ShardedEmbeddingBag] = []
        for i, (num, dim) in enumerate(tables):
            kw: Any = dict(group=group, sparse=sparse, sharding=sharding, owner=i % world)
            if _weights is not None:
                bags.append(ShardedEmbeddingBag.from_pretrained(_weights[i], freeze=False, mode=mode, **kw))
            else:
                bags.append(ShardedEmbeddingBag(num, dim, mode, dtype=dtype, **kw))
        self.bags = torch.nn.ModuleList(bags)

    @classmethod
    def from_pretrained(cls, embeddings: Sequence[torch.Tensor], *, sharding: str = "table", mode: str = "mean",
                        group: GroupLike = None, sparse: bool = False) -> "ShardedEmbeddingBagCollection":
        """Every rank passes the same full tables; each keeps its shards (trainable, unlike torch's default)."""
        return cls([tuple(t.shape) for t in embeddings], sharding=sharding, mode=mode, group=group, sparse=sparse,
                   _weights=embeddings)

    def forward(self, inputs: Sequence[torch.Tensor], offsets: Optional[Sequence[Optional[torch.Tensor]]] = None,
                per_sample_weights: Optional[Sequence[Optional[torch.Tensor]]] = None) -> List[torch.Tensor]:
        """The pooled [B, D_i] rows of each table, in table order: ``inputs[i]`` (with ``offsets[i]`` and
        ``per_sample_weights[i]``, each list None or one entry per table) goes to table i's
        :meth:`ShardedEmbeddingBag.forward`. ValueError when ``inputs`` does not hold one tensor per table."""
        if len(inputs) != len(self.bags):
            raise ValueError(f"ShardedEmbeddingBagCollection: expected {len(self.bags)} inputs, got {len(inputs)}")
        offsets = [None] * len(inputs) if offsets is None else offsets
        psw = [None] * len(inputs) if per_sample_weights is None else per_sample_weights
        return [bag(x, o, w) for bag, x, o, w in zip(self.bags, inputs, offsets, psw)]

    def sgd_step(self, lr: float) -> None:
        """:meth:`ShardedEmbeddingBag.sgd_step` on every table."""
        for bag in self.bags:
            bag.sgd_step(lr)

    def adagrad_step(self, lr: float, eps: float = 1e-10) -> None:
        """:meth:`ShardedEmbeddingBag.adagrad_step` on every table."""
        for bag in self.bags:
            bag.adagrad_step(lr, eps)
