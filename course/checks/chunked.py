"""Checks for 11_debugging's memory fix, ``chunked_attention``.

Oracle: torch's fused ``scaled_dot_product_attention`` (taken at import), which the
exercise turns off while the student's code runs. Memory: every tensor that any
torch operation makes during the call is measured (a ``TorchDispatchMode``), so
the check sees a whole (Tq, Tk) matrix whatever code built it (``@``, einsum,
``torch.cat`` of pieces, a Python loop over rows excepted, which is slow but fine).
"""

from __future__ import annotations

import math
import random

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from ..i18n import N_, say
from . import call, expect_close, expect_shape, fail, forbid, is_close
from .oracles import FUSED, NO_SCALE, PER_BLOCK

_sdpa = F.scaled_dot_product_attention

#: A running max that starts at -inf and is used as it is: where a query's first
#: block of keys is all masked, exp(-inf - (-inf)) is NaN for the whole row.
MASKED_FIRST_BLOCK = N_(
    "a query whose first block of keys is all masked gets NaN: its running max "
    "is still -inf there, and exp(-inf - (-inf)) is NaN. Subtract 0 where the "
    "max is -inf (that block adds nothing) and keep every running value finite.",
    mistake="masked-first-block",
)


class _Largest(TorchDispatchMode):
    """Remember the largest floating-point tensor any operation returns."""

    def __init__(self):
        super().__init__()
        self.numel, self.shape = 0, ()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                if t.numel() > self.numel:
                    self.numel, self.shape = t.numel(), tuple(t.shape)
        return out


def _measured(fn):
    """``fn`` that also returns the shape of the largest float tensor it made."""

    def chunked_attention(*args, **kwargs):
        with _Largest() as seen:
            out = fn(*args, **kwargs)
        return out, list(seen.shape)

    return chunked_attention


def oracle(Q, K, V, mask=None) -> torch.Tensor:
    """Exact softmax attention in float64 (torch's fused kernel)."""
    m = None if mask is None else torch.broadcast_to(mask, (*Q.shape[:-1], K.shape[-2]))
    return _sdpa(Q.double(), K.double(), V.double(), attn_mask=m)


def _per_block(Q, K, V, *, chunk: int, mask=None) -> tuple[torch.Tensor, ...]:
    """The misconception: each block's softmax normalised on its own, summed.

    A block where a query may attend no key is where ways of writing it differ:
    softmax of -inf gives NaN, a large finite fill (-1e9, finfo.min) weighs the
    block's keys alike, a guard (nan_to_num, a zero sum kept at 0) adds nothing.
    One value for each; without such a block all three are the same.
    """
    outs = {"nan": 0, "uniform": 0, "zero": 0}
    for j in range(0, K.shape[-2], chunk):
        s = Q.double() @ K[..., j : j + chunk, :].double().mT / math.sqrt(Q.shape[-1])
        if mask is not None:
            s = s.masked_fill(~mask[..., j : j + chunk], -math.inf)
        p = torch.softmax(s, -1)
        empty = torch.isinf(s).all(-1, keepdim=True)  # (..., Tq, 1)
        v = V[..., j : j + chunk, :].double()
        for kind, fill in (("nan", None), ("uniform", 1.0 / s.shape[-1]), ("zero", 0)):
            w = p if fill is None else p.masked_fill(empty, fill)
            outs[kind] = outs[kind] + w @ v
    if mask is None:
        return (outs["nan"],)
    return tuple(outs.values())


def _run(fn, Q, K, V, *, chunk: int, mask=None):
    targets = [(F, "scaled_dot_product_attention")]
    args = (Q.clone(), K.clone(), V.clone(), chunk)
    kwargs = {} if mask is None else {"mask": mask.clone()}
    with forbid(targets, FUSED):
        got = call(_measured(fn), *args, name="chunked_attention", **kwargs)
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        fail("chunked_attention should return one tensor, the context.")
    return got


def _wrong(Q, K, V, *, chunk: int, mask=None) -> dict:
    """What each named misconception would return."""
    wrong = {NO_SCALE: oracle(Q * math.sqrt(Q.shape[-1]), K, V, mask)}
    if chunk < K.shape[-2]:
        wrong[PER_BLOCK] = _per_block(Q, K, V, chunk=chunk, mask=mask)
        if mask is not None:
            first = torch.broadcast_to(mask, (*Q.shape[:-1], K.shape[-2]))
            empty = ~first[..., :chunk].any(-1, keepdim=True)  # (..., Tq, 1)
            if bool(empty.any()):
                right = oracle(Q, K, V, mask)
                wrong[MASKED_FIRST_BLOCK] = right.masked_fill(empty, math.nan)
    return wrong


def _expect_values(fn, Q, K, V, *, chunk: int, mask=None) -> None:
    out, _ = _run(fn, Q, K, V, chunk=chunk, mask=mask)
    name = say(
        "chunked_attention with Tk={Tk}, chunk_size={chunk}",
        Tk=K.shape[-2],
        chunk=chunk,
    )
    wrong = _wrong(Q, K, V, chunk=chunk, mask=mask)
    expect_close(out, oracle(Q, K, V, mask), name, diagnose=wrong, what="torch")


def _qkv(gen, batch, *, Tq: int, Tk: int, d: int, dtype=torch.float32):
    def draw(T):
        return torch.randn(*batch, T, d, generator=gen, dtype=torch.float64).to(dtype)

    return draw(Tq), draw(Tk), draw(Tk)


def _mask(gen, batch, *, Tq: int, Tk: int, chunk: int = 0) -> torch.Tensor:
    """Random bool (..., Tq, Tk), every query with at least one key it may attend.

    With ``chunk`` < Tk, query 0 may attend no key of the first block (a running
    max that is still -inf there) and the last key.
    """
    mask = torch.rand(*batch, Tq, Tk, generator=gen) < 0.5
    mask[..., torch.randint(0, Tk, (1,), generator=gen)] = True
    if 0 < chunk < Tk:
        mask[..., 0, :chunk] = False
        mask[..., 0, -1] = True
    return mask


def chunked_attention_values(fn) -> None:
    """Equal to full attention; blocks that do not divide Tk evenly."""
    gen = torch.Generator().manual_seed(1111)
    for chunk in (3, 16, 50):
        _expect_values(fn, *_qkv(gen, (2, 3), Tq=7, Tk=16, d=8), chunk=chunk)


def chunked_attention_mask(fn) -> None:
    """With a bool mask (True = may attend), also one that is causal."""
    gen = torch.Generator().manual_seed(1112)
    Q, K, V = _qkv(gen, (2,), Tq=6, Tk=10, d=4)
    _expect_values(fn, Q, K, V, chunk=4, mask=_mask(gen, (2,), Tq=6, Tk=10))
    causal = torch.ones(10, 10, dtype=torch.bool).tril()
    Q, K, V = _qkv(gen, (1, 2), Tq=10, Tk=10, d=4)
    _expect_values(fn, Q, K, V, chunk=3, mask=causal)
    # a dense random mask and small blocks: query 0 may attend nothing in the first
    Q, K, V = _qkv(gen, (2,), Tq=5, Tk=12, d=4)
    _expect_values(fn, Q, K, V, chunk=2, mask=_mask(gen, (2,), Tq=5, Tk=12, chunk=2))


def chunked_attention_memory(fn) -> None:
    """No tensor as large as a whole (Tq, Tk) score matrix is ever made."""
    gen = torch.Generator().manual_seed(1113)
    Q, K, V = _qkv(gen, (1, 2), Tq=64, Tk=1024, d=8)
    out, largest = _run(fn, Q, K, V, chunk=128)
    whole = 2 * 64 * 1024
    size = math.prod(largest) if largest else 0
    if size >= whole // 2:
        fail(
            "chunked_attention made a tensor of shape {largest} ({size} "
            "numbers) for Tq=64, Tk=1024 and chunk_size=128: as large as "
            "the whole score matrix (2, 64, 1024). Work on blocks of at "
            "most chunk_size keys and never gather them into one tensor.",
            largest=tuple(largest),
            size=size,
        )
    # Memory is this test's question; a named mistake in the values is judged by
    # the others, but the result must still be (some) attention.
    tries = [oracle(Q, K, V)]
    for wrong in _wrong(Q, K, V, chunk=128).values():
        tries += wrong if isinstance(wrong, tuple) else [wrong]
    out = expect_shape(out, tries[0].shape, "chunked_attention(Q, K, V, 128)")
    if not any(is_close(out, t) for t in tries):
        fail("chunked_attention does not compute attention (compare with torch's).")


def chunked_attention_random(fn, seed: int) -> None:
    """Random shapes, chunk sizes (1 to more than Tk), masks and dtypes.

    The first case always splits the keys into several blocks and has no mask, so
    that blocks normalised on their own are caught whatever the seed. The last
    case always has a dense random mask, small blocks and a query that may attend
    nothing in the first block, so that a running max left at -inf (NaN) is too.
    """
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    for case in range(5):
        split = case == 0
        batch = tuple(rng.randint(1, 3) for _ in range(rng.randint(0, 2)))
        Tq, Tk, d = rng.randint(1, 9), rng.randint(1 + split, 20), rng.choice([2, 4, 8])
        chunk = rng.randint(1, Tk - 1 if split else Tk + 3)
        dtype = rng.choice([torch.float32, torch.float64])
        Q, K, V = _qkv(gen, batch, Tq=Tq, Tk=Tk, d=d, dtype=dtype)
        masked = not split and rng.random() < 0.5
        mask = _mask(gen, batch, Tq=Tq, Tk=Tk, chunk=chunk) if masked else None
        _expect_values(fn, Q, K, V, chunk=chunk, mask=mask)
    batch = tuple(rng.randint(1, 3) for _ in range(rng.randint(0, 2)))
    Tq, Tk, d = rng.randint(1, 9), rng.randint(4, 20), rng.choice([2, 4, 8])
    chunk = rng.randint(1, Tk // 2)
    dtype = rng.choice([torch.float32, torch.float64])
    Q, K, V = _qkv(gen, batch, Tq=Tq, Tk=Tk, d=d, dtype=dtype)
    _expect_values(
        fn, Q, K, V, chunk=chunk, mask=_mask(gen, batch, Tq=Tq, Tk=Tk, chunk=chunk)
    )
