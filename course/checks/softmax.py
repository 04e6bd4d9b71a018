"""Checks for 05_softmax_and_scaling.

Oracles: torch's softmax (taken before any test turns it off) and torch's fused
``scaled_dot_product_attention``. The scores are read off the latter exactly: with an
extra all-zero key, whose score is 0, ``log(p_j / p_zero)`` is score j. The checks of
the scaling (``attention_scores``, ``dot_product_std``) and that oracle are in
:mod:`.softmax_scaling`, re-exported here.
"""

from __future__ import annotations

import random

import torch

from .. import models
from ..hints import hint as hint  # the notebook's check.hint("<exercise>")
from ..i18n import N_, say
from ..worked import worked as worked  # check.worked("<exercise>"), once tried
from . import (
    SAMPLE_TEXTS,
    allclose,
    call,
    expect_close,
    expect_finite,
    expect_shape,
    fail,
    softmax_forbidden,
)
from .compare import fail_mistaken
from .oracles import sample_qk
from .softmax_scaling import (  # noqa: F401 - the notebook's scaling exercises
    _diagnose_scores,
    _random_qk,
    attention_scores_random,
    attention_scores_shape,
    attention_scores_values,
    dot_product_std_random,
    dot_product_std_values,
    scores_oracle,
)

_softmax = torch.softmax  # the oracle, kept before any check blocks it

WRONG_DIM = N_("rows do not sum to 1 — softmax over the key dim (-1), not dim 0.")
ROWS_DIM = N_(
    "it normalises over dim -2 (the queries); each query's weights over the "
    "keys (dim -1) must sum to 1."
)
BY_HAND = N_(
    "Write softmax by hand with exp and sum: torch's softmax functions are "
    "turned off for this exercise."
)


def _expect_softmax(fn, x: torch.Tensor, dim: int) -> None:
    with softmax_forbidden(BY_HAND):
        got = call(fn, x.clone(), dim, name="softmax")
    want = _softmax(x.double(), dim)
    expect_shape(got, x.shape, f"softmax(x, dim={dim})")
    if not bool(torch.isfinite(got).all()) and x.abs().max() > 80:
        fail(
            "softmax(x, dim={dim}) gives NaN/inf on scores as large as "
            "{largest:.0f}: exp overflows. Subtract the max along dim "
            "first (it does not change the result).",
            dim=dim,
            largest=x.abs().max(),
        )
    expect_finite(got, f"softmax(x, dim={dim})")
    diagnose = {}
    if x.dim() > 1 and dim % x.dim() != 0:
        diagnose[WRONG_DIM] = _softmax(x.double(), 0)
    if x.dim() > 1 and dim % x.dim() == x.dim() - 1:
        diagnose[ROWS_DIM] = _softmax(x.double(), -2)
    expect_close(
        got,
        want,
        f"softmax(x, dim={dim})",
        diagnose=diagnose,
        what="torch.softmax",
        atol=_softmax_atol(x),
    )


def _softmax_atol(x: torch.Tensor) -> float:
    """1e-5, or what a correct formula loses rounding numbers as large as the
    scores (``exp(x - logsumexp(x))`` in float32 on scores of 3e4: up to 2e-3)."""
    return max(1e-5, 2 * torch.finfo(x.dtype).eps * float(x.abs().max()))


def softmax_rows(fn) -> None:
    """Rows of softmax(scores) equal torch.softmax over the last dim."""
    gen = torch.Generator().manual_seed(0)
    _expect_softmax(fn, torch.randn(2, 3, 5, 5, generator=gen) * 3, -1)


def softmax_stable(fn) -> None:
    """softmax stays finite and right on scores of 1e4."""
    gen = torch.Generator().manual_seed(1)
    _expect_softmax(fn, torch.randn(3, 6, generator=gen) * 1e4, -1)


def softmax_random(fn, seed: int) -> None:
    """Other shapes and other dims, float32 and float64, big and small scores."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    for i in range(6):  # each scale twice; every other draw: a matrix over dim -1
        if i % 2 == 0:
            shape, dim = [rng.randint(2, 5) for _ in range(rng.randint(2, 4))], -1
        else:
            shape = [rng.randint(1, 5) for _ in range(rng.randint(1, 4))]
            dim = rng.randrange(-len(shape), len(shape))
        x = torch.randn(*shape, generator=gen) * (1.0, 30.0, 3e4)[i % 3]
        _expect_softmax(fn, x if rng.random() < 0.5 else x.double(), dim)


def _wrong_weights(Q, K, s) -> dict:
    """What each softmax-dim or scaling misconception makes of the scores ``s``."""
    return {
        WRONG_DIM: _softmax(s, 0) if s.dim() > 2 else _softmax(s, -2),
        ROWS_DIM: _softmax(s, -2),
        **{k: _softmax(v, -1) for k, v in _diagnose_scores(Q, K, s).items()},
    }


def _expect_weights(fn, Q, K) -> None:
    got = call(fn, Q.clone(), K.clone(), name="attention_weights")
    s = scores_oracle(Q, K)
    want = _softmax(s, -1)
    expect_shape(got, want.shape, "attention_weights(Q, K)")
    diagnose = _wrong_weights(Q, K, s)
    expect_close(
        got,
        want,
        "attention_weights(Q, K)",
        diagnose=diagnose,
        what=say("torch's scaled dot-product attention"),
    )


def attention_weights_rows(fn) -> None:
    """Each query's weights over the keys sum to 1 (sample text and one more, layer 0)."""
    for text in SAMPLE_TEXTS:
        _expect_rows(fn, *sample_qk(text=text))


def _expect_rows(fn, Q, K) -> None:
    got = call(fn, Q, K, name="attention_weights")
    expect_shape(got, Q.shape[:-1] + (K.shape[-2],), "attention_weights(Q, K)")
    rows = got.sum(-1)
    if not allclose(
        rows.double(), torch.ones_like(rows, dtype=torch.float64), atol=1e-4
    ):
        cols = got.sum(-2)
        if allclose(
            cols.double(), torch.ones_like(cols, dtype=torch.float64), atol=1e-4
        ):
            fail_mistaken("attention_weights", ROWS_DIM)
        fail_mistaken("attention_weights", WRONG_DIM)


def attention_weights_values(fn) -> None:
    """attention_weights equals the model's attention for layer 0 (sample and one more)."""
    model, tok = models.oracle_model(), models.load_tokenizer()
    for text in SAMPLE_TEXTS:
        Q, K = sample_qk(text=text)
        with torch.no_grad():
            want = model(**tok(text, return_tensors="pt")).attentions[0]
        got = call(fn, Q, K, name="attention_weights")
        expect_shape(got, want.shape, "attention_weights(Q, K)")
        expect_close(
            got,
            want,
            "attention_weights(Q, K)",
            diagnose=_wrong_weights(Q, K, scores_oracle(Q, K)),
            what=say("the model's attentions[0]"),
        )


def attention_weights_random(fn, seed: int) -> None:
    """Other shapes, batch sizes and head sizes."""
    rng = random.Random(seed)
    for i in range(4):
        _expect_weights(
            fn,
            *_random_qk(
                seed + i,
                B=rng.randint(2, 3),
                H=rng.randint(2, 4),
                Tq=rng.randint(2, 6),
                Tk=rng.randint(2, 6),
                d=rng.choice([8, 16, 64]),
            ),
        )
