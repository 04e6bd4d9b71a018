"""Checks for 09_build_a_transformer.

Oracles: ``torch.nn.MultiheadAttention`` and ``torch.nn.TransformerEncoderLayer``
(both ``norm_first`` settings) loaded with the student's weights
(:mod:`.transformer_cases`); training and memory are checked in
:mod:`.transformer_runs`, re-exported here.
"""

from __future__ import annotations

import math
import random

import torch
import torch.nn.functional as F
from torch import nn

from ..hints import hint as hint  # the notebook's check.hint("<exercise>")
from ..i18n import N_, say
from ..worked import worked as worked  # check.worked("<exercise>"), once tried
from . import call, expect_close, expect_shape, fail, forbid
from .oracles import NO_SCALE
from .transformer_cases import (
    FF_RESIDUAL,
    INVERTED,
    UNMERGED,
    _mha,
    _mha_like,
    _reference_layer,
    _torch_mask,
    _unmerged,
    _without_ff_residual,
)
from .transformer_runs import (  # noqa: F401 - the notebook's second part
    attention_memory_random,
    attention_memory_small,
    train_both,
    train_deterministic,
    train_with_positions,
    train_without_positions,
)

BUILD = N_(
    "Build attention from your own projections: torch's MultiheadAttention "
    "and fused attention are turned off while your module runs."
)


def _build_attention(cls, d_model: int, heads: int, seed: int):
    torch.manual_seed(seed)
    att = call(cls, d_model, heads, name="MultiHeadSelfAttention")
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        lin = getattr(att, name, None)
        if not isinstance(lin, nn.Linear) or lin.bias is None:
            fail(
                "MultiHeadSelfAttention needs an attribute {name!r}: an "
                "nn.Linear with bias.",
                name=name,
            )
        if (lin.in_features, lin.out_features) != (d_model, d_model):
            fail(
                "{name} should be nn.Linear({d_model}, {d_model}), not "
                "({in_features}, {out_features}).",
                name=name,
                d_model=d_model,
                in_features=lin.in_features,
                out_features=lin.out_features,
            )
    return att.eval()


def _run(module, x, mask, name):
    blocked = [
        (nn.MultiheadAttention, "forward"),
        (F, "multi_head_attention_forward"),
        (F, "scaled_dot_product_attention"),
    ]
    with forbid(blocked, BUILD), torch.no_grad():
        return call(module, x, mask, name=name)


def _expect_attention(cls, *, d_model, heads, B, T, mask_kind, seed) -> None:
    att = _build_attention(cls, d_model, heads, seed)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, d_model, generator=g)
    mask = None
    if mask_kind == "causal":
        mask = torch.ones(T, T, dtype=torch.bool).tril()
    elif mask_kind == "batch":
        mask = torch.rand(B, T, T, generator=g) > 0.3
        mask[:, :, 0] = True  # every query may attend something
    got = _run(att, x, mask, "MultiHeadSelfAttention.forward")
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        fail("forward should return a pair (out, probs).")
    out, probs = got
    ref = _mha_like(att, d_model, heads)
    want, want_p = _mha(ref, x, mask, heads)
    wrong = {}  # message -> (out, probs) that misconception gives
    if mask is not None:
        wrong[INVERTED] = _mha(ref, x, ~mask, heads)
    unscaled = _mha_like(att, d_model, heads)
    with torch.no_grad():  # q scaled by sqrt(d) cancels torch's 1/sqrt(d)
        unscaled.in_proj_weight[:d_model] *= math.sqrt(d_model // heads)
        unscaled.in_proj_bias[:d_model] *= math.sqrt(d_model // heads)
    wrong[NO_SCALE] = _mha(unscaled, x, mask, heads)
    expect_shape(probs, (B, heads, T, T), "probs", "(B, H, T, T).")
    expect_shape(out, (B, T, d_model), "out", "(B, T, D).")
    what = say("torch.nn.MultiheadAttention with your weights")
    by_probs = {m: w[1] for m, w in wrong.items()}
    expect_close(probs, want_p, "probs", diagnose=by_probs, what=what)
    by_out = {m: w[0] for m, w in wrong.items()}
    by_out[UNMERGED] = _unmerged(att, x, want_p, heads)
    expect_close(out, want, "out", diagnose=by_out, what=what)


def mhsa_structure(cls) -> None:
    """MultiHeadSelfAttention(32, 4) has q/k/v/out projections and returns (out, probs)."""
    att = _build_attention(cls, 32, 4, 0)
    x = torch.randn(2, 5, 32, generator=torch.Generator().manual_seed(0))
    out = _run(att, x, None, "MultiHeadSelfAttention.forward")
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        fail("forward should return a pair (out, probs).")
    expect_shape(out[0], (2, 5, 32), "out")
    expect_shape(out[1], (2, 4, 5, 5), "probs")


def mhsa_values(cls) -> None:
    """Without a mask, out and probs equal torch's MultiheadAttention."""
    _expect_attention(cls, d_model=32, heads=4, B=2, T=5, mask_kind=None, seed=1)


def mhsa_mask(cls) -> None:
    """With a causal (T, T) mask and a (B, T, T) mask."""
    sizes = {"d_model": 32, "heads": 4, "T": 6}
    _expect_attention(cls, **sizes, B=2, mask_kind="causal", seed=2)
    _expect_attention(cls, **sizes, B=3, mask_kind="batch", seed=3)


def mhsa_random(cls, seed: int) -> None:
    """Other widths, head counts, batches, lengths and masks."""
    rng = random.Random(seed)
    for i in range(4):
        heads = rng.choice([1, 2, 3, 4])
        if i == 0 and heads == 1:  # one head shows no merge mistake: the first does
            heads = 2
        # The first two are masked and longer than one token, whatever the seed:
        # a mask read the wrong way round must show.
        kind = (
            ("causal", "batch")[i] if i < 2 else rng.choice([None, "causal", "batch"])
        )
        _expect_attention(
            cls,
            d_model=heads * rng.choice([2, 8]),
            heads=heads,
            B=rng.randint(1, 3),
            T=rng.randint(2, 7),
            mask_kind=kind,
            seed=seed + i,
        )


def _expect_block(cls, *, d_model, heads, d_ff, norm_first, B, T, masked, seed) -> None:
    torch.manual_seed(seed)
    block = call(cls, d_model, heads, d_ff, norm_first, name="EncoderBlock")
    for name, kind in (
        ("attn", nn.Module),
        ("norm1", nn.LayerNorm),
        ("norm2", nn.LayerNorm),
        ("ff", nn.Sequential),
    ):
        if not isinstance(getattr(block, name, None), kind):
            fail(
                "EncoderBlock needs an attribute {name!r} ({type_name}).",
                name=name,
                type_name=kind.__name__,
            )
    if len(block.ff) != 3 or not isinstance(block.ff[1], nn.ReLU):
        fail(
            "EncoderBlock.ff should be nn.Sequential(Linear(D, d_ff), "
            "ReLU(), Linear(d_ff, D))."
        )
    block.eval()
    with torch.no_grad():  # non-trivial LayerNorm parameters, so their order shows
        for norm in (block.norm1, block.norm2):
            norm.weight.normal_(1.0, 0.3)
            norm.bias.normal_(0.0, 0.3)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, d_model, generator=g)
    mask = torch.ones(T, T, dtype=torch.bool).tril() if masked else None
    got = _run(block, x, mask, "EncoderBlock.forward")
    sizes = {"d_model": d_model, "heads": heads, "d_ff": d_ff}
    ref = _reference_layer(block, **sizes, norm_first=norm_first)
    other = _reference_layer(block, **sizes, norm_first=not norm_first)
    with torch.no_grad():
        want = ref(x, src_mask=_torch_mask(mask, heads))
        wrong = other(x, src_mask=_torch_mask(mask, heads))
        no_ff_residual = _without_ff_residual(ref, x, _torch_mask(mask, heads))
    if norm_first:
        hint = say(
            "with norm_first=True, LayerNorm comes before each sublayer: x + "
            "attn(norm1(x)), then x + ff(norm2(x)) (pre-LN)."
        )
    else:
        hint = say(
            "with norm_first=False, LayerNorm comes after each residual: "
            "norm1(x + attn(x)), then norm2(x + ff(x)) (post-LN)."
        )
    expect_close(
        got,
        want,
        f"EncoderBlock(norm_first={norm_first})(x)",
        diagnose={hint: wrong, FF_RESIDUAL: no_ff_residual},
        what=say("torch.nn.TransformerEncoderLayer with your weights"),
    )


_BLOCK = {"d_model": 32, "heads": 4, "d_ff": 64, "B": 2, "T": 5}  # the visible tests'


def block_post_ln(cls) -> None:
    """norm_first=False equals TransformerEncoderLayer (post-LN)."""
    _expect_block(cls, **_BLOCK, norm_first=False, masked=False, seed=4)


def block_pre_ln(cls) -> None:
    """norm_first=True equals TransformerEncoderLayer (pre-LN), with a causal mask."""
    _expect_block(cls, **_BLOCK, norm_first=True, masked=True, seed=5)


def block_random(cls, seed: int) -> None:
    """Other sizes, both norm_first settings, with and without masks."""
    rng = random.Random(seed)
    for i in range(4):
        heads = rng.choice([1, 2, 4])
        if i == 0 and heads == 1:  # an attention mistake across heads shows here too
            heads = 2
        _expect_block(  # both norm_first settings, each with and without a mask
            cls,
            d_model=heads * 8,
            heads=heads,
            d_ff=rng.choice([16, 48]),
            norm_first=i % 2 == 0,
            B=rng.randint(1, 3),
            T=rng.randint(2, 7),
            masked=i < 2,
            seed=seed + i,
        )
