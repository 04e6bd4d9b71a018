"""Checks for 11_debugging's first fix, ``masked_softmax``, and the oracle the
notebook's later checks share.

Oracle: torch's softmax over the allowed keys (float64, taken at import), rows with
no allowed key set to zeros (:func:`masked_oracle`).
"""

from __future__ import annotations

import math
import random

import torch

from ..i18n import N_, say
from . import call, expect_close, expect_shape, fail, is_close
from .compare import fail_mistaken

_softmax = torch.softmax

NAN_ROWS = N_(
    "a row whose keys are all masked gives NaN: softmax of a row of -inf is "
    "0/0. Give such rows zeros."
)
LEAKS = N_(
    "a row whose keys are all masked still spreads weight over them (a large "
    "negative fill or bias leaves a softmax of equal, or shifted, scores); "
    "it should be all zeros."
)
INVERTED = N_(
    "the mask is inverted: True means the query may attend that key, so fill "
    "where the mask is False."
)
HALF = N_(
    "in float16 an allowed key gives NaN. 0 * -inf is NaN, so an additive mask "
    "built from -inf, or from -1e9 made a float16 tensor (it rounds to -inf: "
    "float16 stops at 65504), poisons the allowed keys; and exp() of large "
    "float16 scores overflows to inf. Fill the blocked scores with masked_fill "
    "or where and torch.finfo(scores.dtype).min, and take the softmax with "
    "torch.softmax or in float32."
)


def masked_oracle(scores: torch.Tensor, mask: torch.Tensor, dim: int = -1):
    """Softmax over the allowed entries (float64); rows with none give zeros."""
    s = scores.double().masked_fill(~mask, -math.inf)
    return torch.nan_to_num(_softmax(s, dim), nan=0.0)


def _expect_masked(fn, scores, mask, dim: int = -1) -> None:
    got = call(fn, scores.clone(), mask.clone(), dim=dim, name="masked_softmax")
    name = say(
        "masked_softmax on {dtype} scores {shape}",
        dtype=scores.dtype,
        shape=tuple(scores.shape),
    )
    got = expect_shape(got, scores.shape, name)
    if got.dtype != scores.dtype:
        fail(
            "{name} is {dtype}; the result should keep the scores' dtype.",
            name=name,
            dtype=got.dtype,
        )
    full = torch.broadcast_to(mask, scores.shape)
    empty = torch.broadcast_to(~full.any(dim, keepdim=True), scores.shape)
    want = masked_oracle(scores, mask, dim)
    tol = 2e-3 if scores.dtype == torch.float16 else 1e-5
    if bool(empty.any()) and is_close(got[~empty], want[~empty], tol, tol):
        if bool(got[empty].isnan().all()):
            fail_mistaken(name, NAN_ROWS)
        if bool(got[empty].isfinite().all() and got[empty].any()):
            fail_mistaken(name, LEAKS)
    if scores.dtype == torch.float16 and bool(got[~empty].isnan().any()):
        fail_mistaken(name, HALF)
    if scores.dtype == torch.float64 and is_close(
        got, masked_oracle(scores.float(), mask, dim), tol, tol
    ):
        return  # computed in float32, as the task allows (and the float16 fix does)
    s = scores.double().masked_fill(full, -math.inf)
    wrong = {INVERTED: torch.nan_to_num(_softmax(s, dim))}
    expect_close(got, want, name, atol=tol, rtol=tol, diagnose=wrong, what="torch")


def _scores(gen, shape, scale: float, *, dtype=torch.float32):
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * scale).to(dtype)


def _padding(gen, B: int, Tk: int) -> torch.Tensor:
    lengths = torch.randint(1, Tk + 1, (B,), generator=gen)
    lengths[0] = Tk
    return (torch.arange(Tk) < lengths[:, None])[:, None, None, :]  # (B, 1, 1, Tk)


def masked_softmax_values(fn) -> None:
    """A padding mask, every query with something to attend."""
    gen = torch.Generator().manual_seed(1101)
    scores = _scores(gen, (3, 2, 5, 7), 3.0)
    _expect_masked(fn, scores, _padding(gen, 3, 7))


def masked_softmax_empty_rows(fn) -> None:
    """Queries with no allowed key get zeros, not NaN."""
    gen = torch.Generator().manual_seed(1102)
    scores = _scores(gen, (2, 6, 6), 2.0)
    mask = torch.rand(2, 6, 6, generator=gen) < 0.6
    mask[0, 1], mask[1, 4], mask[1, 0] = False, False, True
    _expect_masked(fn, scores, mask)


def masked_softmax_half(fn) -> None:
    """float16 scores up to 3e4, with empty rows: finite, right, still float16."""
    gen = torch.Generator().manual_seed(1103)
    scores = _scores(gen, (2, 4, 9), 1e4, dtype=torch.float16)
    mask = torch.rand(2, 4, 9, generator=gen) < 0.5
    mask[0, 2] = False
    mask[1, :, 0] = True
    _expect_masked(fn, scores, mask)


def masked_softmax_random(fn, seed: int) -> None:
    """Other shapes, dims, dtypes and broadcast masks."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    for i in range(5):
        shape = [rng.randint(1, 4) for _ in range(rng.randint(1, 2))]
        shape += [rng.randint(2, 9), rng.randint(2, 9)]
        dtype = rng.choice([torch.float16, torch.float32, torch.float64])
        scale = 1e4 if dtype == torch.float16 else rng.choice([1.0, 1e3, 1e6])
        mask_shape = list(shape)
        mask_shape[rng.randrange(len(shape) - 2)] = 1  # broadcast over a batch dim
        mask = torch.rand(mask_shape, generator=gen) < 0.6
        dim = rng.choice([-1, -1, len(shape) - 2])
        if i < 2:  # a first row with nothing allowed, a last one with something
            index, other = [slice(None)] * mask.dim(), -2 if dim == -1 else -1
            index[other] = 0
            mask[tuple(index)] = False
            index[other], index[-3 - other] = -1, 0
            mask[tuple(index)] = True
        _expect_masked(fn, _scores(gen, shape, scale, dtype=dtype), mask, dim)
