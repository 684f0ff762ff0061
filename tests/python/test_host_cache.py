"""scatterx's host memory: the cache (scatterx.host_cache_bytes / empty_host_cache: a freed output's memory is
kept for the next op, never shared with a live array, and given back on demand), and the arrays scatterx.empty
hands out of it (shareable between the ranks on a host for 64 KiB to 8 MiB: scatterx.is_shareable)."""

import os
import subprocess
import sys

import numpy as np
import pytest

import scatterx


def caching() -> bool:
    return os.environ.get("SCATTERX_HOST_CACHE_BYTES", "") != "0"


def sharing() -> bool:
    return os.environ.get("SCATTERX_SHAREABLE_HOST_BYTES", "") != "0"


def test_freed_output_is_kept_and_emptied():
    scatterx.empty_host_cache()
    assert scatterx.host_cache_bytes() == 0
    x = np.arange(1 << 20, dtype=np.float64).reshape(-1, 4)  # 8 MiB
    index = np.arange(x.shape[0])[::-1].copy()
    out = scatterx.index_select(x, 0, index)
    nbytes = out.nbytes
    del out
    held = scatterx.host_cache_bytes()
    assert held >= nbytes if caching() else held == 0
    assert scatterx.empty_host_cache() == held
    assert scatterx.host_cache_bytes() == 0


def test_recycled_memory_never_aliases_a_live_output():
    x = np.random.default_rng(0).random((1 << 17, 8))
    index = np.random.default_rng(1).integers(0, x.shape[0], x.shape[0])
    first = scatterx.index_select(x, 0, index)
    del first  # its block goes to the cache ...
    second = scatterx.index_select(x, 0, index)  # ... and comes back here
    third = scatterx.index_select(x, 0, index[::-1].copy())  # a fresh block: second is alive
    assert not np.shares_memory(second, third)
    np.testing.assert_array_equal(second, x[index])
    np.testing.assert_array_equal(third, x[index[::-1]])


@pytest.mark.parametrize("size", [(1 << 16,), (256, 1024), ((3, 5, 4096),)], ids=["ints", "two_ints", "a_tuple"])
def test_empty_numpy_arrays(size):
    a = scatterx.empty(*size, dtype=np.float32)
    shape = size[0] if isinstance(size[0], tuple) else size
    assert isinstance(a, np.ndarray) and a.shape == shape and a.dtype == np.float32
    assert a.flags.c_contiguous and a.flags.writeable
    a[...] = 7.5
    assert (a == 7.5).all()
    # 256 KiB and 1 MiB, 240 KiB: inside the shareable sizes, views into them too; numpy's own memory is not.
    assert scatterx.is_shareable(a) == sharing()
    assert scatterx.is_shareable(a.reshape(-1)[100:2000]) == sharing()
    assert scatterx.is_shareable(a.reshape(-1)[::-3]) == sharing()
    assert not scatterx.is_shareable(np.empty_like(a))


@pytest.mark.parametrize("dtype", ["float16", "float64", "complex64", "int8", "uint8", "int16", "int32", "int64", "bool"])
def test_empty_takes_numpy_dtypes_types_and_names(dtype):
    for spelled in (dtype, np.dtype(dtype), np.dtype(dtype).type):
        a = scatterx.empty(3, 4, dtype=spelled)
        assert isinstance(a, np.ndarray) and a.shape == (3, 4) and a.dtype == np.dtype(dtype)


def test_only_mid_sized_arrays_are_shareable():
    assert not scatterx.is_shareable(scatterx.empty(1024, dtype=np.uint8))  # below 64 KiB
    assert scatterx.is_shareable(scatterx.empty(64 << 10, dtype=np.uint8)) == sharing()
    assert scatterx.is_shareable(scatterx.empty(8 << 20, dtype=np.uint8)) == sharing()
    assert not scatterx.is_shareable(scatterx.empty((8 << 20) + 1, dtype=np.uint8))  # above 8 MiB
    assert not scatterx.is_shareable(scatterx.empty(0, dtype=np.float32))
    # an op's output is scatterx's memory too
    x = np.random.default_rng(0).random((1 << 14, 8))
    assert scatterx.is_shareable(scatterx.index_select(x, 0, np.arange(x.shape[0]))) == sharing()


def test_empty_arrays_are_distinct_and_outlive_their_name():
    arrays = [scatterx.empty(1 << 15, dtype=np.int64) for _ in range(6)]  # 256 KiB each
    for i, a in enumerate(arrays):
        a[:] = i
    for i, a in enumerate(arrays):
        assert (a == i).all()
    view = arrays[0][10:20]
    del arrays
    assert (view == 0).all()


def test_empty_torch_tensors(torch):
    t = scatterx.empty(64, 1024, dtype=torch.bfloat16)
    assert isinstance(t, torch.Tensor) and t.shape == (64, 1024) and t.dtype == torch.bfloat16
    assert t.device.type == "cpu" and t.is_contiguous()
    t.fill_(1.5)
    assert t.sum().item() == 1.5 * 64 * 1024
    assert scatterx.is_shareable(t) == sharing()
    assert not scatterx.is_shareable(torch.empty(64, 1024))
    n = scatterx.empty(100, 1000, dtype="float32", framework="torch")
    assert isinstance(n, torch.Tensor) and n.dtype == torch.float32
    like = scatterx.empty_like(torch.zeros(3, 40000, dtype=torch.int16))
    assert isinstance(like, torch.Tensor) and like.shape == (3, 40000) and like.dtype == torch.int16
    assert scatterx.is_shareable(like) == sharing()
    with pytest.raises(ValueError, match="scatterx.empty_like: expected a CPU tensor"):
        scatterx.empty_like(torch.zeros(2, device="meta"))


def test_empty_like_numpy():
    like = scatterx.empty_like(np.zeros((5, 30000), np.complex64))
    assert isinstance(like, np.ndarray) and like.shape == (5, 30000) and like.dtype == np.complex64


def test_empty_bad_arguments():
    with pytest.raises(ValueError, match=r"scatterx.empty: expected non-negative sizes, got \(3, -1\)"):
        scatterx.empty(3, -1, dtype=np.float32)
    with pytest.raises(TypeError, match="scatterx.empty: expected size to be ints"):
        scatterx.empty(2.5, dtype=np.float32)
    with pytest.raises(TypeError, match="scatterx.empty: expected dtype to be a numpy dtype"):
        scatterx.empty(3, dtype=object())
    with pytest.raises(TypeError, match="empty: expected .*float32.*got"):
        scatterx.empty(3, dtype="U8")  # a numpy dtype scatterx has no kernels for
    with pytest.raises(TypeError, match="numpy has no bfloat16"):
        scatterx.empty(3, dtype="bfloat16")
    with pytest.raises(ValueError, match="expected framework 'numpy' or 'torch', got 'jax'"):
        scatterx.empty(3, dtype=np.float32, framework="jax")
    with pytest.raises(ValueError, match="at most 16 dimensions are supported, got 17"):
        scatterx.empty(*([1] * 30), dtype=np.float32)
    with pytest.raises(TypeError, match="scatterx.empty_like: expected a numpy array or a torch tensor, got list"):
        scatterx.empty_like([1, 2])


def test_shareable_memory_off():
    code = ("import numpy as np, scatterx; a = scatterx.empty(1 << 18, dtype=np.float32); a[:] = 2; "
            "assert (a == 2).all(); print(scatterx.is_shareable(a))")
    env = dict(os.environ, SCATTERX_SHAREABLE_HOST_BYTES="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
