"""Checks for 09_build_a_transformer.

Oracles: ``torch.nn.MultiheadAttention`` and ``torch.nn.TransformerEncoderLayer``
(both ``norm_first`` settings) loaded with the student's weights (the cases below
the checks, with the misconceptions they name); the second part, training on
:func:`course.data.echo_task` (held-out accuracy on freshly drawn data, with and
without positions) and the memory attention takes, last.
"""

from __future__ import annotations

import math
import numbers
import random
from itertools import combinations, product

import torch
import torch.nn.functional as F
from torch import nn

from ..data import ECHO_LEN, ECHO_VOCAB, echo_task
from ..hints import hint as hint  # the notebook's check.hint("<exercise>")
from ..i18n import N_, mistakes_of, say
from ..worked import worked as worked  # check.worked("<exercise>"), once tried
from . import attention_steps as steps_
from . import call, expect_close, expect_shape, fail
from .calls import CaseVerdicts, CheckFailed, both
from .compare import either, fail_mistaken, is_close
from .lessons import FUSED_ATTENTION, Lesson
from .mistaken import Step, fewest, mistaken
from .oracles import BY_WIDTH, NO_SCALE, OVER_QUERIES, SPLIT_NO_TRANSPOSE

BUILD = N_(
    "Build attention from your own projections: torch's MultiheadAttention "
    "and fused attention are turned off while your module runs.",
    mistake="module-shortcut",
)
LESSONS = {
    name: Lesson(BUILD, FUSED_ATTENTION)
    for name in ("MultiHeadSelfAttention", "EncoderBlock")
}


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


def _run(module, x, mask, exercise: str):
    """``module(x, mask)``, the exercise's lesson enforced."""
    with LESSONS[exercise].enforced(), torch.no_grad():
        return call(module, x, mask, name=f"{exercise}.forward")


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
    got = _run(att, x, mask, "MultiHeadSelfAttention")
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        fail("forward should return a pair (out, probs).")
    out, probs = got
    want, want_p = _mha(_mha_like(att, d_model, heads), x, mask, heads)
    # one map for all heads, (B, T, T): judged as their mean (nn.MultiheadAttention's
    # default, average_attn_weights=True), then the out it came with
    averaged = heads > 1 and getattr(probs, "shape", None) == (B, T, T)
    if not averaged:
        expect_shape(probs, (B, heads, T, T), "probs", "(B, H, T, T).")
    expect_shape(out, (B, T, d_model), "out", "(B, T, D).")
    what = say("torch.nn.MultiheadAttention with your weights")
    start = {"x": x, "keep": None if mask is None else _keep(mask)}
    steps = _attention_steps(att, heads)
    verdicts = CaseVerdicts()  # a wrong split and a wrong merge: both named
    with verdicts:
        if averaged:
            _expect_averaged(probs, want_p, start, steps, what)
        expect_close(
            probs,
            want_p,
            "probs",
            diagnose=lambda: mistaken(start, steps[:4], result=lambda st: st["p"]),
            what=what,
        )
    said = verdicts.said
    with verdicts:  # of a split and a merge mistake, the merge is what out adds
        expect_close(
            out,
            want,
            "out",
            diagnose=lambda: mistaken(
                start, steps, result=lambda st: st["out"], said=said
            ),
            what=what,
        )
    verdicts.fail_if_any()


HEADS_AVERAGED = N_(
    "the heads' probs are averaged into one map, (B, T, T): return each head's "
    "own, (B, H, T, T), as nn.MultiheadAttention does with "
    "average_attn_weights=False.",
    mistake="probs-averaged",
)


def _expect_averaged(probs, want_p, start, steps, what: str) -> None:
    """Judge (B, T, T) ``probs`` as the mean over the heads of the right probs,
    or of what a known mistake gives (named with it); else say the shape."""
    mean = want_p.mean(1)
    if is_close(probs, mean):
        fail_mistaken("probs", HEADS_AVERAGED)

    def diagnose():
        tiers = mistaken(start, steps[:4], result=lambda st: st["p"].mean(1))
        return [{both(HEADS_AVERAGED, m): v for m, v in t.items()} for t in tiers]

    try:
        expect_close(probs, mean, "probs", diagnose=diagnose, what=what)
    except CheckFailed as err:
        if err.mistakes:  # averaged, and a mistake before it
            raise
    B, H, T, _ = want_p.shape  # of no mean we know: the shape is what we can say
    expect_shape(probs, (B, H, T, T), "probs", "(B, H, T, T).")  # always fails


def _keep(mask: torch.Tensor) -> torch.Tensor:
    """The bool mask (True = may attend), (T, T) or (B, 1, T, T) against the
    (B, H, T, T) scores."""
    return mask if mask.dim() == 2 else mask[:, None]


def _attention_steps(att, heads: int) -> list[Step]:
    """The module's attention step by step from its own weights (project, scale,
    mask, softmax, weigh, merge, out_proj), with the ways each step goes wrong."""
    W = {name: getattr(att, f"{name}_proj") for name in ("q", "k", "v", "out")}
    D = W["q"].in_features
    d = D // heads

    def split(by: str):
        def way(st):
            B, T, _ = st["x"].shape
            if by != "H, d" and 1 in (heads, d if by == "d, H" else T):
                return None  # the same numbers as the right split
            with torch.no_grad():
                q, k, v = (F.linear(st["x"], W[n].weight, W[n].bias) for n in "qkv")
            if by == "H, d":
                q, k, v = (t.view(B, T, heads, d).transpose(1, 2) for t in (q, k, v))
            elif by == "d, H":  # head h gets features h, h + H, ...
                q, k, v = (
                    t.view(B, T, d, heads).permute(0, 3, 1, 2) for t in (q, k, v)
                )
            else:  # viewed straight as (B, H, T, d)
                q, k, v = (t.view(B, heads, T, d) for t in (q, k, v))
            return {**st, "q": q, "k": k, "v": v, "split": by}

        return way

    def merge(no_transpose: bool):
        def way(st):
            c = st["c"]  # (B, H, T, d)
            B, _, T, _ = c.shape
            if no_transpose:
                if heads == 1:
                    return None
                return {**st, "c": c.reshape(B, T, D)}
            if st["split"] == "d, H":  # merged back the way it was split
                return {**st, "c": c.permute(0, 2, 3, 1).reshape(B, T, D)}
            return {**st, "c": c.transpose(1, 2).reshape(B, T, D)}

        return way

    def project_out(apply: bool):
        def way(st):
            if not apply:
                return {**st, "out": st["c"]}
            with torch.no_grad():
                return {**st, "out": W["out"](st["c"])}

        return way

    return [
        Step(
            right=split("H, d"),
            wrong={SPLIT_D_H: split("d, H"), SPLIT_NO_TRANSPOSE: split("view")},
        ),
        steps_.scale(
            d, {NO_SCALE: 1.0} | ({BY_WIDTH: math.sqrt(D)} if heads > 1 else {})
        ),
        steps_.fill_mask(inverted=INVERTED),
        steps_.softmax({OVER_QUERIES: -2}),
        steps_.weigh(),
        Step(right=merge(False), wrong={UNMERGED: merge(True)}),
        Step(right=project_out(True), wrong={NO_OUT_PROJ: project_out(False)}),
    ]


def mhsa_structure(cls) -> None:
    """MultiHeadSelfAttention(32, 4) has q/k/v/out projections and returns (out, probs)."""
    att = _build_attention(cls, 32, 4, 0)
    x = torch.randn(2, 5, 32, generator=torch.Generator().manual_seed(0))
    out = _run(att, x, None, "MultiHeadSelfAttention")
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
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    for i in range(4):
        with verdicts:
            heads = rng.choice([1, 2, 3, 4])
            if i == 0 and heads == 1:  # one head shows no merge mistake: the first does
                heads = 2
            # The first two are masked and longer than one token, whatever the seed:
            # a mask read the wrong way round must show.
            kind = (
                ("causal", "batch")[i]
                if i < 2
                else rng.choice([None, "causal", "batch"])
            )
            d_model, B, T = (
                heads * rng.choice([2, 8]),
                rng.randint(1, 3),
                rng.randint(2, 7),
            )
            if i == 0 and T == heads:  # a (T, T) mask read as (B, T, T), mask[:, None],
                T += 1  # raises where T != H (and lays its rows on the heads where not)
            _expect_attention(
                cls,
                d_model=d_model,
                heads=heads,
                B=B,
                T=T,
                mask_kind=kind,
                seed=seed + i,
            )
    verdicts.fail_if_any()


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
    verdicts = CaseVerdicts()  # another activation, and a wrong block: both named
    if len(block.ff) != 3 or not isinstance(block.ff[1], nn.ReLU):
        with verdicts:
            fail(FF_STRUCTURE)
        linears = len(block.ff) == 3 and all(
            isinstance(block.ff[i], nn.Linear) for i in (0, 2)
        )
        if not linears:  # nothing else to judge it by
            verdicts.fail_if_any()
    block.eval()
    with torch.no_grad():  # non-trivial LayerNorm parameters, so their order shows
        for norm in (block.norm1, block.norm2):
            norm.weight.normal_(1.0, 0.3)
            norm.bias.normal_(0.0, 0.3)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, d_model, generator=g)
    mask = torch.ones(T, T, dtype=torch.bool).tril() if masked else None
    got = _run(block, x, mask, "EncoderBlock")
    sizes = {"d_model": d_model, "heads": heads, "d_ff": d_ff, "act": block.ff[1]}
    ref = _reference_layer(block, **sizes, norm_first=norm_first)
    other = _reference_layer(block, **sizes, norm_first=not norm_first)
    one_norm = _reference_layer(block, **sizes, norm_first=norm_first)
    with torch.no_grad():
        want = ref(x, src_mask=_torch_mask(mask, heads))
        wrong = other(x, src_mask=_torch_mask(mask, heads))
        no_ff_residual = _without_ff_residual(ref, x, _torch_mask(mask, heads))
        ff_from_x = _ff_residual_from_x(ref, x, _torch_mask(mask, heads))
        one_norm.norm2.load_state_dict(block.norm1.state_dict())
        norm1_twice = one_norm(x, src_mask=_torch_mask(mask, heads))
    diagnose = {
        FF_RESIDUAL: no_ff_residual,
        FF_FROM_X: ff_from_x,
        NORM1_TWICE: norm1_twice,
    }
    if norm_first:
        diagnose[NORMED_RESIDUAL] = _normed_residual(ref, x, _torch_mask(mask, heads))
    if norm_first:
        hint = say(
            "with norm_first=True, LayerNorm comes before each sublayer: x + "
            "attn(norm1(x)), then x + ff(norm2(x)) (pre-LN).",
            mistake="norm-first",
        )
    else:
        hint = say(
            "with norm_first=False, LayerNorm comes after each residual: "
            "norm1(x + attn(x)), then norm2(x + ff(x)) (post-LN).",
            mistake="post-ln",
        )
    diagnose = {hint: wrong, **diagnose}
    pairs = {}
    if mask is not None:  # the mask never reaches the attention, alone or with
        with torch.no_grad():  # the other LayerNorm order
            diagnose[BLOCK_MASK_DROPPED] = ref(x)
            pairs[both(hint, BLOCK_MASK_DROPPED)] = other(x)
    with verdicts:
        expect_close(
            got,
            want,
            f"EncoderBlock(norm_first={norm_first})(x)",
            diagnose=[diagnose, pairs],
            what=say("torch.nn.TransformerEncoderLayer with your weights"),
        )
    verdicts.fail_if_any()


FF_STRUCTURE = N_(
    "EncoderBlock.ff should be nn.Sequential(Linear(D, d_ff), ReLU(), Linear(d_ff, "
    "D)).",
    mistake="ff-structure",
)
FF_FROM_X = N_(
    "the feed-forward's residual adds the block's input x: it goes round the "
    "feed-forward only, from h, what the attention sublayer gave: norm2(h + ff(h)) "
    "with norm_first=False, h + ff(norm2(h)) with norm_first=True.",
    mistake="ff-residual-from-x",
)


BLOCK_MASK_DROPPED = N_(
    "the mask is not passed on to the attention: forward(x, mask) must hand mask to "
    "self.attn, or every token sees every other.",
    mistake="block-mask-dropped",
)


NORMED_RESIDUAL = N_(
    "the residual carries the normalised x: with norm_first=True, x itself goes "
    "round each sublayer, h = x + attn(norm1(x)), then h + ff(norm2(h)); "
    "x = norm1(x) first loses it.",
    mistake="normed-residual",
)
NORM1_TWICE = N_(
    "norm1 is used for both sublayers: the feed-forward's LayerNorm is norm2, with "
    "weights of its own.",
    mistake="norm1-twice",
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
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    for i in range(4):
        with verdicts:
            heads = rng.choice([1, 2, 4])
            if (
                i == 0 and heads == 1
            ):  # an attention mistake across heads shows here too
                heads = 2
            d_ff, B, T = rng.choice([16, 48]), rng.randint(1, 3), rng.randint(2, 7)
            if i < 2 and T == heads:  # its (T, T) mask read as (B, T, T) raises (as
                T += 1  # in mhsa_random), not a broadcast of its rows on the heads
            _expect_block(  # both norm_first settings, each with and without a mask
                cls,
                d_model=heads * 8,
                heads=heads,
                d_ff=d_ff,
                norm_first=i % 2 == 0,
                B=B,
                T=T,
                masked=i < 2,
                seed=seed + i,
            )
    verdicts.fail_if_any()


# --- what the checks compare against: torch's modules with the student's weights ------


INVERTED = N_(
    "the mask is inverted: True means the query may attend that key.",
    mistake="mask-inverted",
)
UNMERGED = N_(
    "the heads were merged without the transpose: (B, H, T, d) reshaped "
    "straight to (B, T, H*d) mixes tokens and heads. Transpose to (B, T, H, d) "
    "first, then reshape.",
    mistake="merge",
)
SPLIT_D_H = N_(
    "the heads were split as (d, H): view(B, T, d, H) gives head h every H-th "
    "feature (h, h + H, ...), not its own block of d. Split the last dim as (H, d): "
    "view(B, T, H, d), then transpose to (B, H, T, d).",
    mistake="split-d-h",
)
NO_OUT_PROJ = N_(
    "out_proj was not applied: the merged heads (B, T, D) go through the fourth "
    "projection, out_proj, before they are returned.",
    mistake="no-out-proj",
)
FF_RESIDUAL = N_(
    "the feed-forward's residual is missing: with norm_first=False the block "
    "ends norm2(h + ff(h)), with norm_first=True h + ff(norm2(h)), where h is "
    "what the attention sublayer gave.",
    mistake="ff-residual",
)


def _mha_like(att, d_model: int, heads: int) -> nn.MultiheadAttention:
    """torch's MultiheadAttention holding the student's four projections."""
    ref = nn.MultiheadAttention(d_model, heads, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(
            torch.cat([att.q_proj.weight, att.k_proj.weight, att.v_proj.weight])
        )
        ref.in_proj_bias.copy_(
            torch.cat([att.q_proj.bias, att.k_proj.bias, att.v_proj.bias])
        )
        ref.out_proj.weight.copy_(att.out_proj.weight)
        ref.out_proj.bias.copy_(att.out_proj.bias)
    return ref.eval()


def _torch_mask(mask, heads: int):
    """Our bool mask (True = may attend) as torch's attn_mask (True = blocked)."""
    if mask is None:
        return None
    return ~(mask if mask.dim() == 2 else mask.repeat_interleave(heads, dim=0))


def _mha(ref, x, mask, heads: int):
    """torch's (out, per-head probs) for our bool mask (True = may attend)."""
    with torch.no_grad():
        return ref(
            x,
            x,
            x,
            attn_mask=_torch_mask(mask, heads),
            need_weights=True,
            average_attn_weights=False,
        )


def _reference_layer(block, *, d_model, heads, d_ff, norm_first, act=None):
    """torch's TransformerEncoderLayer (ReLU, or the activation module ``act``
    where it is another; no dropout) holding the weights of the student's
    ``block``, LayerNorm first or after as ``norm_first`` says."""
    ref = nn.TransformerEncoderLayer(
        d_model,
        heads,
        d_ff,
        dropout=0.0,
        activation="relu" if act is None or isinstance(act, nn.ReLU) else act,
        batch_first=True,
        norm_first=norm_first,
    )
    with torch.no_grad():
        ref.self_attn.load_state_dict(
            _mha_like(block.attn, d_model, heads).state_dict()
        )
        for mine, theirs in (
            (block.ff[0], ref.linear1),
            (block.ff[2], ref.linear2),
            (block.norm1, ref.norm1),
            (block.norm2, ref.norm2),
        ):
            theirs.load_state_dict(mine.state_dict())
    return ref.eval()


def _sublayers(ref, attn_mask):
    """``ref``'s self-attention and feed-forward, as functions of their input."""

    def sa(y):
        return ref.self_attn(y, y, y, attn_mask=attn_mask, need_weights=False)[0]

    def ff(y):
        return ref.linear2(ref.activation(ref.linear1(y)))

    return sa, ff


def _without_ff_residual(ref, x, attn_mask) -> torch.Tensor:
    """``ref``'s output with the feed-forward's residual left out (either LN
    order), computed from the reference layer's parts (the student's weights)."""
    sa, ff = _sublayers(ref, attn_mask)
    with torch.no_grad():
        if ref.norm_first:
            h = x + sa(ref.norm1(x))
            return ff(ref.norm2(h))
        return ref.norm2(ff(ref.norm1(x + sa(x))))


def _ff_residual_from_x(ref, x, attn_mask) -> torch.Tensor:
    """``ref``'s output with the feed-forward's residual taken from the block's
    input x instead of the attention sublayer's output h (either LN order)."""
    sa, ff = _sublayers(ref, attn_mask)
    with torch.no_grad():
        if ref.norm_first:
            h = x + sa(ref.norm1(x))
            return x + ff(ref.norm2(h))
        return ref.norm2(x + ff(ref.norm1(x + sa(x))))


def _normed_residual(ref, x, attn_mask) -> tuple[torch.Tensor, ...]:
    """``ref``'s pre-LN output with the residual taken from the normalised input
    (``x = norm1(x); x = x + attn(x)``): around both sublayers (the same again
    around the feed-forward), or around the attention only."""
    sa, ff = _sublayers(ref, attn_mask)
    with torch.no_grad():
        n = ref.norm1(x)
        h = n + sa(n)
        both_normed = ref.norm2(h) + ff(ref.norm2(h))
        return both_normed, h + ff(ref.norm2(h))


# --- the second part: training on the echo task, and attention's memory ---------------


def _held_out_accuracy(model, seed: int) -> float:
    if (model.vocab_size, model.seq_len) != (ECHO_VOCAB, ECHO_LEN):
        fail(
            "The model is for vocab_size={vocab_size}, "
            "seq_len={seq_len}; the echo task has {ECHO_VOCAB} and "
            "{ECHO_LEN}.",
            vocab_size=model.vocab_size,
            seq_len=model.seq_len,
            ECHO_VOCAB=ECHO_VOCAB,
            ECHO_LEN=ECHO_LEN,
        )
    tokens, targets = echo_task(512, torch.Generator().manual_seed(10_000 + seed))
    model.eval()
    with torch.no_grad():
        logits = call(model, tokens, name=say("the trained model"))
    expect_shape(
        logits,
        (512, ECHO_LEN, ECHO_VOCAB),
        "model(tokens)",
        say("Logits for every position: (B, T, vocab)."),
    )
    keep = targets != -100
    return float((logits.argmax(-1) == targets)[keep].float().mean())


# Held-out accuracy the trained model must reach with positions and stay under
# without. Correct answers built in other orders land at 0.927 or more with
# positions, 0.27 or less without (bench/training_margin.py).
WITH_POSITIONS, WITHOUT_POSITIONS = 0.85, 0.5

_runs: dict = {}  # outcomes of train_tiny_transformer, reused by later tests


def _train(fn, seed: int, use_positions: bool, again: bool = False):
    """The answer's run for ``seed``; an earlier test's run of the same function is
    reused unless ``again`` (training is most of this notebook's grading time)."""
    got = call(
        fn,
        seed,
        use_positions=use_positions,
        name="train_tiny_transformer",
        cache=None if again else _runs,
    )
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        fail("train_tiny_transformer should return (model, history).")
    model, history = got
    for attr in ("vocab_size", "seq_len"):
        if not isinstance(getattr(model, attr, None), int):
            fail(
                "The model should carry an int attribute {attr!r} (the task's size).",
                attr=attr,
            )
    if not isinstance(history, dict) or not history.get("loss"):
        fail("history should be a dict with a non-empty 'loss' list.")
    return model, history


def train_both(fn, seed: int = 0) -> dict:
    """Train the answer with and without positions: ``{use_positions: history}``.

    The notebook calls this to plot the two runs; the tests of the exercise then
    judge these same runs instead of training them again.
    """
    return {use: _train(fn, seed, use)[1] for use in (True, False)}


def train_with_positions(fn) -> None:
    """With positions the model echoes the token ECHO_LAG back (held-out, >= 85%)."""
    model, history = _train(fn, 0, True)
    if any(math.isnan(x) for x in history["loss"]):
        fail(
            "The training loss became NaN. A causal mask read the wrong "
            "way round leaves the last query nothing to attend (11), and "
            "softmax of a row of -inf is NaN; True must mean may attend.",
            mistake="nan",
        )
    acc = _held_out_accuracy(model, 0)
    if acc < WITH_POSITIONS:
        fail(
            "With positions the held-out accuracy is {acc:.2f}; it "
            "should reach {limit:.2f}. Check that the positions are added, the "
            "mask is causal (True on and below the diagonal), and the "
            "run is the one asked for (Adam, lr 5e-3, 100 steps of 32).",
            mistake="low-accuracy",
            acc=acc,
            limit=WITH_POSITIONS,
        )


def train_without_positions(fn) -> None:
    """Without positions it cannot (held-out accuracy <= 50%)."""
    model, _ = _train(fn, 0, False)
    acc = _held_out_accuracy(model, 1)
    if acc > WITHOUT_POSITIONS:
        fail(
            "Without positions the held-out accuracy is {acc:.2f}; a "
            "model that cannot see order should stay at or below {limit:.2f}. Are "
            "positions still added when use_positions=False, or is the "
            "mask not causal (a model that sees the future can read the "
            "answer off its input)?",
            acc=acc,
            limit=WITHOUT_POSITIONS,
        )


def train_deterministic(fn, seed: int) -> None:
    """The same seed gives the same loss curve (a new run vs an earlier one)."""
    _, first = _train(fn, seed, True)
    _, again = _train(fn, seed, True, again=True)
    if list(map(repr, first["loss"])) != list(map(repr, again["loss"])):
        fail(
            "Two runs with the same seed give different losses: seed "
            "torch (and every generator) from `seed`.",
            mistake="loss-unseeded",
        )


FIXED_BYTES = N_(
    "attention_memory assumed 4 bytes per value, float32's: a value takes "
    "bytes_per_value bytes ({nbytes} here).",
    mistake="fixed-bytes",
)
NO_HEADS = N_(
    "attention_memory forgot the heads: every head has its own (T, T) matrix.",
    mistake="no-heads",
)
NO_BATCH = N_(
    "attention_memory forgot the batch: each of the B sequences has its own "
    "(H, T, T) attentions.",
    mistake="no-batch",
)
NO_BYTES = N_(
    "attention_memory counts values, not bytes: multiply by bytes_per_value.",
    mistake="no-bytes",
)
LINEAR = N_(
    "attention_memory grows linearly in T; the attention matrix "
    "is (T, T), so it grows with T^2.",
    mistake="linear",
)


TRIANGLE = N_(
    "attention_memory counts a triangle of the (T, T) matrix, about T^2 / 2 "
    "values: its loop over the queries adds the query's index (0 + 1 + ... + "
    "T - 1) where each query has a weight for all T keys, T * T in all.",
    mistake="triangle-count",
)
ONE_SHORT = N_(
    "attention_memory counts {n} - 1 of the {n} in B * H * T * T: a loop that "
    "starts at 1, range(1, {n}), runs one short; range({n}) runs {n} times.",
    mistake="loop-one-short",
)


#: The known mistakes of attention_memory, in the order a verdict names them
#: (where two give one number, as B - 1 and no batch do at B = 2, the first).
MEMORY_MISTAKES = (
    FIXED_BYTES,
    NO_HEADS,
    NO_BATCH,
    NO_BYTES,
    LINEAR,
    TRIANGLE,
    ONE_SHORT,
)


def _memory_values(B: int, H: int, T: int, nbytes: int, most: int = 2) -> dict:
    """What attention_memory gives with one known mistake, or with up to ``most``
    (each in another factor of B * H * T * T * bytes): ``{mistakes: bytes}``, the
    mistakes a tuple of ``(verdict, way)``, in the order of
    :data:`MEMORY_MISTAKES` (a way: which of the mistake's forms, e.g. T or T * 2
    for T ** 2; for a loop one short, the factor it shortens)."""
    factors = [  # each factor's right value, and its wrong ones: (mistake, way, v)
        (nbytes, [(FIXED_BYTES, 0, 4), (NO_BYTES, 0, 1)]),  # 4: right for float32
        (H, [(NO_HEADS, 0, 1), (ONE_SHORT, "H", H - 1)]),
        (B, [(NO_BATCH, 0, 1), (ONE_SHORT, "B", B - 1)]),
        (
            T * T,
            [
                (LINEAR, 0, T),
                (LINEAR, 1, T * 2),  # T * 2 written for T ** 2
                (TRIANGLE, 0, T * (T - 1) // 2),  # sum(range(T))
                (TRIANGLE, 1, T * (T + 1) // 2),  # sum(range(1, T + 1))
            ],
        ),
    ]
    out: dict[tuple, int] = {}
    for n in range(1, most + 1):
        for where in combinations(range(len(factors)), n):
            for chosen in product(*(factors[i][1] for i in where)):
                values = [value for value, _ in factors]
                for i, (_, _, v) in zip(where, chosen, strict=True):
                    values[i] = v
                mistakes = sorted(
                    ((m, way) for m, way, _ in chosen),
                    key=lambda mw: MEMORY_MISTAKES.index(mw[0]),
                )
                out[tuple(mistakes)] = math.prod(values)
    return out


def _memory_said(mistakes: tuple, nbytes: int) -> str:
    """The verdict on an answer with ``mistakes`` (``(verdict, way)`` pairs)."""
    said = [
        say(m, nbytes=nbytes, n=way if m == ONE_SHORT else "") for m, way in mistakes
    ]
    return both(*said)


def _memory_order(mistakes: tuple) -> tuple[int, ...]:
    """Fewest mistakes first, then in the order of :data:`MEMORY_MISTAKES`."""
    return (len(mistakes), *(MEMORY_MISTAKES.index(m) for m, _ in mistakes))


def _memory_want(B: int, H: int, T: int, nbytes: int) -> int:
    """The bytes of a real (B, H, T, T) tensor of that many bytes a value."""
    dtype = {2: torch.float16, 4: torch.float32, 8: torch.float64}[nbytes]
    probe = torch.empty(B, H, T, T, dtype=dtype)
    return probe.numel() * probe.element_size()


#: attention_memory's answer of another type than int.
MEMORY_NOT_INT = N_("attention_memory should return an int (bytes), not {type_name}.")


def _memory_answer(fn, *, B, H, T, nbytes) -> tuple[int, str | None]:
    """The answer's attention_memory(B, H, T, nbytes), an int, and the verdict on
    its type where it is a whole number of another type (a float from math.pow
    or a division): its numbers are judged too."""
    got = call(fn, B, H, T, nbytes, name="attention_memory")
    if not isinstance(got, bool) and isinstance(got, int):
        return got, None
    wrong_type = say(MEMORY_NOT_INT, type_name=type(got).__name__)
    whole = (
        isinstance(got, numbers.Real)
        and not isinstance(got, bool)
        and math.isfinite(got)
        and float(got).is_integer()
    )
    if not whole:
        fail(wrong_type)
    return int(got), wrong_type


def _judge_answer(answer: tuple[int, str | None], *, prefer=(), **case) -> None:
    """:func:`_judge_memory` of an answer of :func:`_memory_answer`; of a whole
    number of another type, its type first, then ("Also:") any known mistake its
    number shows."""
    got, wrong_type = answer
    if wrong_type is None:
        _judge_memory(got, **case, prefer=prefer)
        return
    verdicts = CaseVerdicts()
    with verdicts:
        fail(wrong_type)
    with verdicts:
        _judge_memory(got, **case, prefer=prefer)
    verdicts.fail_if_any()


def _judge_memory(got: int, *, B, H, T, nbytes, prefer=()) -> None:
    """Fail unless ``got`` is the right number of bytes, naming the fewest known
    mistakes that give it (of ``prefer``, the mistakes that give all the answer's
    numbers, where they give this one too)."""
    if got == _memory_want(B, H, T, nbytes):
        return
    values = _memory_values(B, H, T, nbytes)
    found = sorted((m for m, v in values.items() if v == got), key=_memory_order)
    found = [m for m in found if m in prefer] or found
    if found:
        fewest = [m for m in found if len(m) == len(found[0])]
        named = list(dict.fromkeys(_memory_said(m, nbytes) for m in fewest))
        if len(named) == 1 or len(fewest[0]) == 1:
            fail(named[0])  # one mistake: where several give it, the first named
        err = CheckFailed(either(named))  # two, and two ways to get there
        err.alternatives = tuple(mistakes_of(m) for m in named)
        raise err
    fail(
        "attention_memory({B}, {H}, {T}, {nbytes}) is {got}; a (B, H, T, "
        "T) tensor of that dtype takes {want} bytes.",
        B=B,
        H=H,
        T=T,
        nbytes=nbytes,
        got=got,
        want=_memory_want(B, H, T, nbytes),
    )


def _memory_explained(cases: list[dict], answers: list) -> list[tuple]:
    """The fewest known mistakes (each in one way) that give every one of
    ``answers`` (ints; a verdict where the call failed) on its case, the right
    ones too; several where several do, none where none do."""
    seen = [  # a mistake that makes no difference on a case fits it
        (_memory_values(**case), got)
        for case, got in zip(cases, answers, strict=True)
        if isinstance(got, int)
    ]
    if not seen:
        return []
    known = sorted(  # each (mistake, way) once, in the order verdicts name them
        {way for mistakes in seen[0][0] for way in mistakes},
        key=lambda way: (MEMORY_MISTAKES.index(way[0]), way[1]),
    )
    fits = fewest(
        known,
        lambda chosen: all(values.get(chosen) == got for values, got in seen),
        most=2,
    )
    return sorted(fits, key=_memory_order)


def _expect_memory(fn, *, B, H, T, nbytes) -> None:
    answer = _memory_answer(fn, B=B, H=H, T=T, nbytes=nbytes)
    _judge_answer(answer, B=B, H=H, T=T, nbytes=nbytes)


def attention_memory_small(fn) -> None:
    """attention_memory(2, 12, 128) matches a real (2, 12, 128, 128) float32 tensor."""
    _expect_memory(fn, B=2, H=12, T=128, nbytes=4)


def _tells_t(B: int, H: int, T: int, nbytes: int) -> bool:
    """Whether each mistake in T ** 2 (T, T * 2, a triangle) gives a number of
    its own here: not the right one, nor what another mistake gives (T * 2 is
    counting values at T = 2 * nbytes, no heads at T = 2H; a triangle, T at
    T = 3; ...)."""
    values = _memory_values(B, H, T, nbytes, most=1)  # {((verdict, way),): v}
    seen = [*values.values(), B * H * T * T * nbytes]
    return all(
        seen.count(v) == 1 for ((m, _),), v in values.items() if m in (LINEAR, TRIANGLE)
    )


def attention_memory_random(fn, seed: int) -> None:
    """Other sizes and dtypes; an answer with known mistakes hears of the ones
    that give all its numbers (where one case alone has other explanations)."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    cases = []
    for i in range(4):
        # B, H and the bytes per value differ, and T > H: where two are equal,
        # two mistakes (forgetting the heads or the batch, counting values)
        # give the same number, and the verdict could not say which; nor does
        # T make a mistake in T ** 2 give what another gives (:func:`_tells_t`).
        # The first case is never float32, so that an answer which assumes 4
        # bytes per value fails on every seed; the second has B > 2, so that a
        # loop over the batch one short (B - 1) is told from no batch (1).
        B = rng.randint(3, 4) if i == 1 else rng.randint(2, 4)
        nbytes = rng.choice([n for n in (2, 4, 8) if n != B and (i or n != 4)])
        heads = rng.choice([h for h in range(1, 17) if h not in (B, nbytes)])
        T = rng.choice(
            [t for t in range(heads + 1, 201) if _tells_t(B, heads, t, nbytes)]
        )
        cases.append({"B": B, "H": heads, "T": T, "nbytes": nbytes})
    answers = []
    for case in cases:
        try:
            answers.append(_memory_answer(fn, **case))
        except CheckFailed as err:  # judged in its turn below
            answers.append(err)
    gots = [a if isinstance(a, CheckFailed) else a[0] for a in answers]
    prefer = _memory_explained(cases, gots)
    for case, answer in zip(cases, answers, strict=True):
        with verdicts:
            if isinstance(answer, CheckFailed):
                raise answer
            _judge_answer(answer, **case, prefer=prefer)
    verdicts.fail_if_any()
