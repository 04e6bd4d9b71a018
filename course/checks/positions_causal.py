"""Checks for 08_positions_and_masks, its masks: the causal mask and causal
attention.

Oracles: index comparison for the causal mask, and torch's
``scaled_dot_product_attention(is_causal=True)``, turned off while the student's
code runs.
"""

from __future__ import annotations

import math
import random

import torch
import torch.nn.functional as F

from ..i18n import N_, say
from . import CheckFailed, call, equal, expect_close, expect_shape, fail, forbid
from .compare import expect_bool_mask

_sdpa = F.scaled_dot_product_attention
SWAPPED = N_(
    "the causal mask is upper/lower swapped: query i may attend keys j <= i, "
    "the lower triangle (True on and below the diagonal)."
)

CAUSAL = N_(
    "Build the causal attention yourself (scores, mask, softmax): torch's "
    "fused attention is turned off for this exercise."
)


def _expect_causal(fn, T: int) -> None:
    got = call(fn, T, name="causal_mask")
    got = expect_bool_mask(got, f"causal_mask({T})")
    expect_shape(got, (T, T), f"causal_mask({T})")
    i = torch.arange(T)
    want = i[:, None] >= i[None, :]
    if equal(got, want):
        return
    if equal(got, want.T):
        fail(SWAPPED)
    if equal(got, i[:, None] > i[None, :]):
        fail(
            "the diagonal is masked: a token may attend to itself (j <= i, not j < i)."
        )
    if equal(got, ~want):
        fail(
            "True and False are the wrong way round: True means the "
            "query may attend that key."
        )
    fail("causal_mask({T}) is not the lower triangle (True where key <= query).", T=T)


def causal_mask_small(fn) -> None:
    """causal_mask(4) is the (4, 4) lower triangle of True."""
    _expect_causal(fn, 4)


def causal_mask_random(fn, seed: int) -> None:
    """Other lengths, 1 included."""
    for T in (1, 2, 7, 1 + seed % 13):
        _expect_causal(fn, T)


def _expect_causal_attention(fn, Q, K, V, part: str) -> None:
    with forbid(
        [(F, "scaled_dot_product_attention")],
        CAUSAL,
    ):
        got = _unbatched_named(fn, Q, K, V)
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        fail("causal_attention should return a pair (probs, context).")
    probs, context = got
    T = Q.shape[-2]
    if Q.dim() == 2 and getattr(probs, "shape", None) != (T, T):
        fail(
            "causal_attention on an unbatched (T, d) input, Q of shape {shape}, "
            "returned probs of shape {got}; want ({T}, {T}): take T and the "
            "transpose from the last two dims only, and give the mask no batch "
            "dim of its own.",
            shape=tuple(Q.shape),
            got=tuple(getattr(probs, "shape", ())),
            T=T,
        )
    eye = torch.eye(T, dtype=torch.float64).expand(*Q.shape[:-2], T, T)
    want_p = _sdpa(Q.double(), K.double(), eye, is_causal=True)
    want_c = _sdpa(Q.double(), K.double(), V.double(), is_causal=True)
    s = Q.double() @ K.double().mT / math.sqrt(Q.shape[-1])
    tril = torch.ones(T, T, dtype=torch.bool).tril()
    diagnose = {
        SWAPPED: torch.softmax(s.masked_fill(~tril.T, float("-inf")), -1),
        say(
            "the mask was applied after the softmax: rows no longer sum to "
            "1. Mask the scores (-inf) before the softmax."
        ): torch.softmax(s, -1) * tril,
        say(
            "missing 1/sqrt(d): divide the scores by the square root of the head size."
        ): torch.softmax(
            (s * math.sqrt(Q.shape[-1])).masked_fill(~tril, float("-inf")), -1
        ),
        say(
            "the causal mask is missing: query i must not see keys after i."
        ): torch.softmax(s, -1),
    }
    if part in ("probs", "all"):
        expect_close(
            probs,
            want_p,
            "probs",
            diagnose=diagnose,
            what=say("torch's causal attention"),
        )
    if part in ("context", "all"):
        expect_close(
            context,
            want_c,
            "context",
            diagnose={k: v @ V.double() for k, v in diagnose.items()},
            what=say("torch's causal attention"),
        )


def _unbatched_named(fn, Q, K, V):
    """The student's (probs, context); where an unbatched (T, d) input raises, the
    verdict says it is the unbatched input."""
    try:
        return call(fn, Q.clone(), K.clone(), V.clone(), name="causal_attention")
    except CheckFailed as err:
        if Q.dim() != 2:
            raise
        fail(
            "causal_attention fails on an unbatched (T, d) input, Q of shape "
            "{shape}: Q, K, V are (..., T, d), with any number of batch dims, "
            "none too. {verdict}",
            shape=tuple(Q.shape),
            verdict=str(err),
        )


#: The batch dims causal_attention_random tries, in order: (B, H), (B,), none
#: (an unbatched (T, d) input), then drawn ones.
BATCH_DIMS = (2, 1, 0)


def _qkv(seed, *shape):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) for _ in range(3))


def causal_attention_probs(fn) -> None:
    """probs equal torch's causal attention weights (B=2, H=3, T=5, d=8)."""
    _expect_causal_attention(fn, *_qkv(0, 2, 3, 5, 8), part="probs")


def causal_attention_context(fn) -> None:
    """context equals torch's causal attention output."""
    _expect_causal_attention(fn, *_qkv(1, 2, 3, 5, 8), part="context")


def causal_attention_random(fn, seed: int) -> None:
    """Other shapes: two batch dims, one, none (an unbatched (T, d) input), then
    drawn ones."""
    rng = random.Random(seed)
    counts = [*BATCH_DIMS, rng.randint(0, 2)]
    for i, count in enumerate(counts):
        shape = [rng.randint(1, 3) for _ in range(count)]
        shape += [rng.randint(1, 8), rng.choice([2, 16])]
        _expect_causal_attention(fn, *_qkv(seed + i, *shape), part="all")
