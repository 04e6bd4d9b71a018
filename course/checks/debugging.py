"""Checks for 11_debugging.

Oracles: torch's softmax over the allowed keys (float64, taken at import:
:mod:`.debugging_masked`, which checks ``masked_softmax``, re-exported here), the
model's own attentions on a padded batch (for the key mask and the head split),
and ``nn.TransformerEncoderLayer`` (a position table must break its symmetry).
Chunked attention is checked in :mod:`.chunked`.
"""

from __future__ import annotations

import math
import random

import torch

from ..hints import hint as hint  # the notebook's check.hint("<exercise>")
from ..i18n import N_, say
from ..worked import worked as worked  # check.worked("<exercise>"), once tried
from . import (
    call,
    expect_close,
    expect_finite,
    expect_shape,
    fail,
)
from .compare import expect_bool_mask
from .debugging_masked import (  # noqa: F401 - the notebook's first fix
    HALF,
    masked_oracle,
    masked_softmax_empty_rows,
    masked_softmax_half,
    masked_softmax_random,
    masked_softmax_values,
)
from .oracles import course_case, random_cases

KEYS_INVERTED = N_(
    "the mask is inverted: it is True at the padding. attention_mask is 1 at "
    "real tokens, and True must mean may attend."
)
MIXED = N_(
    "x.view(B, H, T, d) reads each token's features as if they were laid out "
    "head by head across tokens, so heads and tokens are mixed. View as (B, "
    "T, H, d), then transpose(1, 2)."
)


def _expect_key_mask(fn, case) -> None:
    got = call(fn, case.mask.clone(), name="key_mask")
    got = expect_bool_mask(got, "key_mask(attention_mask)")
    q, k, _ = case.qkv()  # (B, H, T, d)
    scores = q @ k.mT / math.sqrt(case.d)  # (B, H, T, T)
    B, T = case.mask.shape
    try:
        full = torch.broadcast_to(got, scores.shape)
    except RuntimeError:
        full = None
    if full is None or tuple(got.shape[-3:-1]) not in {(1, 1), ()}:
        fail(
            "key_mask gives shape {got}; it should be (B, 1, 1, T) = "
            "{want}, so that it broadcasts over heads and queries.",
            got=tuple(got.shape),
            want=(B, 1, 1, T),
        )
    wrong = {KEYS_INVERTED: masked_oracle(scores, case.mask[:, None, None, :] == 0)}
    expect_close(
        masked_oracle(scores, full),
        case.probs,
        say("the attention with your key_mask"),
        diagnose=wrong,
        what=say("the model's attentions"),
    )


def key_mask_values(fn) -> None:
    """On a padded batch of the course model, the model's own attentions."""
    _expect_key_mask(fn, course_case(padded=True))


def key_mask_random(fn, seed: int) -> None:
    """Tiny BERTs of other sizes on padded random batches."""
    for case in random_cases(seed):
        _expect_key_mask(fn, case)


def _expect_split(fn, case) -> None:
    B, T, D = case.hidden.shape
    with torch.no_grad():
        x = case.self_attn.query(case.hidden), case.self_attn.key(case.hidden)
    got = [call(fn, t.clone(), case.H, name="fixed_split_heads") for t in x]
    for g in got:
        expect_shape(g, (B, case.H, T, case.d), "fixed_split_heads(x, num_heads)")
    scores = got[0] @ got[1].mT / math.sqrt(case.d)  # (B, H, T, T)
    allowed = case.mask.bool()[:, None, None, :]
    view = [t.reshape(B, case.H, T, case.d) for t in x]  # the bug, for its message
    wrong = {MIXED: masked_oracle(view[0] @ view[1].mT / math.sqrt(case.d), allowed)}
    expect_close(
        masked_oracle(scores, allowed),
        case.probs,
        say("the attention of your split Q and K"),
        diagnose=wrong,
        what=say("the model's attentions"),
    )


def fixed_split_heads_values(fn) -> None:
    """Layer 0's Q and K of the course model, split: the model's attentions."""
    _expect_split(fn, course_case(padded=True))


def fixed_split_heads_random(fn, seed: int) -> None:
    """Tiny BERTs with other head counts (two or more: one head hides the bug)."""
    for case in random_cases(seed, heads=(2, 3, 4)):
        _expect_split(fn, case)


def _expect_table(fn, T: int, D: int) -> torch.Tensor:
    got = call(fn, T, D, name="position_table")
    name = f"position_table({T}, {D})"
    got = expect_shape(got, (T, D), name)
    if not got.is_floating_point():
        fail("{name} should hold floats, not {dtype}.", name=name, dtype=got.dtype)
    expect_finite(got, name)
    got = got.double()
    if float(got.abs().max()) > 10:
        fail(
            "{name} reaches {largest:.3g}: values that grow with the "
            "position swamp the token embeddings (about 1 in size). Keep "
            "them bounded.",
            name=name,
            largest=float(got.abs().max()),
        )
    gaps = torch.cdist(got, got) + torch.eye(T, dtype=got.dtype) * 1e9
    if float(gaps.min()) < 1e-3:
        i, j = divmod(int(gaps.argmin()), T)
        same = (
            say("every row is zero")
            if float(got.abs().max()) < 1e-9
            else (say("rows {i} and {j} are the same", i=i, j=j))
        )
        fail(
            "{name}: {same}, so the model still cannot tell those "
            "positions apart (attention alone sees a bag of tokens). "
            "Give every position its own row.",
            name=name,
            same=same,
        )
    return got


def position_table_distinct(fn) -> None:
    """(T, D) floats, bounded, one distinct row per position."""
    _expect_table(fn, 12, 32)


def _breaks_symmetry(table: torch.Tensor, seed: int) -> bool:
    """Does a transformer layer, positions added, notice a permutation of its input?"""
    T, D = table.shape
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    heads = next(h for h in (4, 2, 1) if D % h == 0)
    layer = torch.nn.TransformerEncoderLayer(D, heads, 2 * D, 0.0, batch_first=True)
    x = torch.randn(1, T, D, generator=gen, dtype=torch.float64)
    perm = torch.randperm(T, generator=gen)
    while T > 1 and bool((perm == torch.arange(T)).all()):
        perm = torch.randperm(T, generator=gen)
    with torch.no_grad():
        layer = layer.double().eval()
        a = layer(x + table)[:, perm]
        b = layer(x[:, perm] + table)
    return not torch.allclose(a, b, atol=1e-6)


def position_table_random(fn, seed: int) -> None:
    """Other sizes: rows distinct, and a layer sees the order of its input. The
    first table is long enough (20 to 40 rows) for values that grow to show."""
    rng = random.Random(seed)
    for i in range(4):
        T, D = rng.randint(20 if i == 0 else 2, 40), rng.choice([8, 16, 24, 64])
        table = _expect_table(fn, T, D)
        if not _breaks_symmetry(table, seed + i):
            fail(
                "With position_table({T}, {D}) added, a transformer "
                "layer still gives the same outputs, reordered, for "
                "reordered tokens.",
                T=T,
                D=D,
            )
