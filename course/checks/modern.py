"""Checks for 12_modern_encoder: rotary positions, sliding windows, shared K/V heads.

Oracles are transformers' own code and models: ModernBERT's rotary embedding and
``apply_rotary_pos_emb``; the attention weights of a random ``ModernBertModel``
(where its sliding-window layers let a query look) and what its attention modules
return (captured by forward hooks); a random Llama's attention layer, whose K/V
heads are shared by groups of query heads (``repeat_kv``), and the cache it keeps.
A known mistake's numbers are made from the same library pieces, fed what the
mistake changes.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
import random

import torch
import transformers
from transformers.models.llama import modeling_llama as llama
from transformers.models.modernbert import modeling_modernbert as mb

from .. import models
from ..hints import hint as hint  # the notebook's check.hint("<exercise>")
from ..i18n import N_, say
from ..worked import worked as worked  # check.worked("<exercise>"), once tried
from . import attention_steps as steps_
from . import call, expect_close, expect_equal, expect_shape, fail
from .calls import VIEW_FAILED, CaseVerdicts, CheckFailed, both, runs
from .compare import expect_bool_mask, fail_mistaken
from .lessons import FUSED_ATTENTION, KV_SHARING, ROTARY_CODE, Lesson
from .mistaken import Step, fewest, mistaken, unsaid
from .oracles import BY_D, NO_SCALE, additive_mask, eager_attention

_Tensor = torch.Tensor  # taken at import, before any student code runs
_equal = torch.equal

FIXED_BASE = N_(
    "it ignores `base`: it rotates with 10000 whatever base it is given (ModernBERT's "
    "global and local layers use different bases).",
    mistake="fixed-base",
)
INTERLEAVED = N_(
    "rotated neighbouring pairs (0, 1), (2, 3), ... (the interleaved layout of "
    "GPT-J and RoFormer); ModernBERT pairs feature i with feature i + d/2 "
    "(rotate_half).",
    mistake="interleaved",
)
BACKWARDS = N_(
    "rotated the wrong way: the second half gets +x1·sin, the first half -x2·sin.",
    mistake="backwards",
)
FREQUENCIES = N_(
    "the frequencies are off: pair i turns by position · base^(-2i/d), for i = 0 "
    "to d/2 - 1.",
    mistake="frequencies",
)
ANGLES_INTERLEAVED = N_(
    "the angles are laid out interleaved (t0, t0, t1, t1, ...) while the pairs "
    "are rotate_half's (feature i with feature i + d/2): the two features of a "
    "pair must turn by the same angle, so cos and sin hold the d/2 angles once "
    "in each half, in order.",
    mistake="angles-interleaved",
)
PARTIAL = N_(
    "only part of the features is rotated (a partial rotary, like GPT-NeoX's "
    "rotary_pct or ChatGLM2's half), the rest passed through: ModernBERT turns "
    "all d features, pairing feature i with feature i + d/2.",
    mistake="partial-rotary",
)
NO_POSITIONS = N_(
    "the rotation ignores `positions` (it uses 0, 1, 2, ...): turn each token by "
    "the position it is given.",
    mistake="positions",
)
OFF_BY_ONE = N_(
    "the window is off by one: a query sees the keys up to window // 2 positions "
    "away, that distance included.",
    mistake="window-off-by-one",
)
WHOLE_WINDOW = N_(
    "each side sees a whole window: ModernBERT's local_attention is the width of "
    "the window, window // 2 on each side.",
    mistake="whole-window",
)
ONE_SIDED = N_(
    "the window looks only back (a causal window); an encoder's window reaches "
    "window // 2 positions on both sides.",
    mistake="one-sided",
)
NEGATIVE_FLOOR = N_(
    "for an odd window the band reaches one key too far back: Python reads "
    "-window // 2 as (-window) // 2, which rounds down to -(window // 2) - 1. "
    "Negate after dividing: -(window // 2).",
    mistake="negative-floor",
)
INVERTED = N_(
    "the window mask is inverted: True means may attend.", mistake="window-inverted"
)
TILED = N_(
    "K/V heads repeated in the wrong order (`repeat`/tile gives query head h K/V "
    "head h % H_kv); query heads h·g to h·g + g - 1 share K/V head h: "
    "repeat_interleave.",
    mistake="tiled",
)
MASK_IGNORED = N_(
    "the mask is ignored: blocked keys must get no weight.", mistake="mask-ignored"
)
BOOL_ADDED = N_(
    "the bool mask was added to the scores: True adds 1 and False 0, so blocked "
    "keys keep their weight. Fill the blocked scores instead: "
    "scores.masked_fill(~mask, float('-inf')).",
    mistake="bool-mask-added",
)
ROPE_ON_V = N_(
    "the values are rotated too: rotary positions turn only Q and K, so that the "
    "scores see offsets; V carries content.",
    mistake="rope-on-v",
)
K_NOT_ROTATED = N_(
    "only Q is rotated: rotate K as well, or the scores see absolute positions of "
    "the queries alone.",
    mistake="k-not-rotated",
)
WINDOW_ON_GLOBAL = N_(
    "the window is applied on a global layer: only the layers whose type is "
    "sliding_attention use it.",
    mistake="window-on-global",
)
NO_WINDOW = N_(
    "a sliding_attention layer attends to every key: apply the window mask there.",
    mistake="no-window",
)
WRONG_THETA = N_(
    "the rotary base is the other layer type's: global and local layers rotate "
    "with their own rope_theta (config.rope_parameters[layer type]).",
    mistake="theta",
)
KV_ONLY_K = N_(
    "counts only K: the cache keeps K and V, two tensors per layer.", mistake="only-k"
)
KV_VALUES = N_(
    "counts values, not bytes: multiply by bytes_per_value.", mistake="values"
)
KV_NO_BATCH = N_(
    "forgets the batch: every sequence in the batch has its own cache.", mistake="batch"
)
KV_NO_LAYERS = N_(
    "counts one layer: every layer keeps its own K and V, so multiply by num_layers.",
    mistake="one-layer",
)
ROTARY_LIB = N_(
    "Rotate by hand: transformers' rotary functions are turned off for this exercise."
)
SHARED_KV = N_(
    "Share the K/V heads by hand: repeat_kv and torch's fused attention are "
    "turned off for this exercise."
)
QKV_HEADS_FIRST = N_(
    "Wqkv's output was read as (B, T, H, 3, d): ModernBERT lays it out q, k, v "
    "first, then the heads, view(B, T, 3, H, d).",
    mistake="qkv-heads-first",
)
LAYER_BY_HAND = N_(
    "Compute the layer's attention by hand from attn.Wqkv and attn.Wo, with your "
    "rotary and sliding_window_mask: calling the attention module (or "
    "transformers' rotary functions, or torch's fused attention) is the shortcut "
    "this exercise turns off."
)

LESSONS = {
    "rotary": Lesson(ROTARY_LIB, ROTARY_CODE),
    "grouped_query_attention": Lesson(SHARED_KV, KV_SHARING),
    # modernbert_attention(attn, hidden)
    "modernbert_attention": Lesson(
        LAYER_BY_HAND, FUSED_ATTENTION | ROTARY_CODE, whole=("0",)
    ),
}


# --- rotary ---------------------------------------------------------------------


def _cos_sin(d: int, positions: _Tensor, base: float) -> tuple[_Tensor, _Tensor]:
    """ModernBERT's rotary (cos, sin) for head size ``d``, each (T, d)."""
    config = transformers.ModernBertConfig(
        hidden_size=d, num_attention_heads=1, global_rope_theta=base
    )
    rope = mb.ModernBertRotaryEmbedding(config)
    cos, sin = rope(torch.zeros(1), positions.long()[None], "full_attention")
    return cos[0].double(), sin[0].double()


def _rotated(x: _Tensor, positions: _Tensor, base: float, sign: int = 1) -> _Tensor:
    """``x`` (..., T, d) rotated by transformers' ``apply_rotary_pos_emb``."""
    *lead, T, d = x.shape
    cos, sin = _cos_sin(d, positions, base)
    flat = x.double().reshape(-1, T, d)
    out, _ = mb.apply_rotary_pos_emb(flat, flat, cos, sign * sin, unsqueeze_dim=0)
    return out.double().reshape(x.shape)


def _angles_interleaved(x: _Tensor, positions: _Tensor, base: float) -> _Tensor:
    """rotate_half's pairs (i, i + d/2) turned by ModernBERT's angles laid out
    interleaved, each repeated in place (t0, t0, t1, t1, ...): feature i turns by
    angle i // 2, its partner by angle (i + d/2) // 2."""
    *lead, T, d = x.shape
    cos, sin = (
        c[:, : d // 2].repeat_interleave(2, dim=-1)
        for c in _cos_sin(d, positions, base)
    )
    flat = x.double().reshape(-1, T, d)
    out, _ = mb.apply_rotary_pos_emb(flat, flat, cos, sin, unsqueeze_dim=0)
    return out.double().reshape(x.shape)


def _interleaved(x: _Tensor, positions: _Tensor, base: float) -> _Tensor:
    """The interleaved layout's rotation: pair (2i, 2i+1) turns by angle i."""
    d = x.shape[-1]
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = positions.double()[:, None] * inv  # (T, d/2)
    even, odd = x.double()[..., 0::2], x.double()[..., 1::2]
    turned = (
        even * angle.cos() - odd * angle.sin(),
        even * angle.sin() + odd * angle.cos(),
    )
    return torch.stack(turned, dim=-1).flatten(-2)


def _other_frequencies(x: _Tensor, positions: _Tensor, base: float) -> tuple:
    """Half-split rotations with the exponent written as i/d or 2i/(d/2)."""
    d = x.shape[-1]
    out = []
    for exponent in (torch.arange(d // 2) / d, torch.arange(0, d, 2) / (d // 2)):
        angle = positions.double()[:, None] * base ** (-exponent.double())
        cos, sin = torch.cat([angle.cos()] * 2, -1), torch.cat([angle.sin()] * 2, -1)
        half = torch.cat([-x.double()[..., d // 2 :], x.double()[..., : d // 2]], -1)
        out.append(x.double() * cos + half * sin)
    return tuple(out)


def _expect_rotary(fn, x: _Tensor, positions: _Tensor, base: float) -> None:
    with LESSONS["rotary"].enforced():
        got = call(fn, x.clone(), positions.clone(), base, name="rotary")
    expect_shape(
        got,
        x.shape,
        "rotary(x, positions, base)",
        N_("A rotation keeps the shape of x."),
    )
    T = x.shape[-2]
    diagnose = {
        INTERLEAVED: _interleaved(x, positions, base),
        BACKWARDS: _rotated(x, positions, base, sign=-1),
        FREQUENCIES: _other_frequencies(x, positions, base),
        ANGLES_INTERLEAVED: _angles_interleaved(x, positions, base),
    }
    # a partial rotary beside each mistake a rotation of its part can make
    partial = {INTERLEAVED: lambda part, p, b: _interleaved(part, p, b)}
    partial[BACKWARDS] = lambda part, p, b: _rotated(part, p, b, sign=-1)
    if not _equal(positions, torch.arange(T)):
        diagnose[NO_POSITIONS] = _rotated(x, torch.arange(T), base)
        partial[NO_POSITIONS] = lambda part, p, b: _rotated(part, torch.arange(T), b)
    if base != 10000.0:
        diagnose[FIXED_BASE] = _rotated(x, positions, 10000.0)
        partial[FIXED_BASE] = lambda part, p, b: _rotated(part, p, 10000.0)
    pairs = {}
    if _partial(x, positions, base, _rotated):
        diagnose[PARTIAL] = _partial(x, positions, base, _rotated)
        pairs = {
            both(PARTIAL, verdict): _partial(x, positions, base, rotate)
            for verdict, rotate in partial.items()
        }
    expect_close(
        got,
        _rotated(x, positions, base),
        "rotary(x, positions, base)",
        diagnose=[diagnose, pairs],
        what=say("ModernBERT's rotary embedding"),
    )


def _partial(x: _Tensor, positions: _Tensor, base: float, rotate) -> tuple:
    """A partial rotary: the first half (or quarter) of the features rotated by
    ``rotate(part, positions, base)``, the rest passed through. The part's
    frequencies are its own (base^(-2i/r), r the rotated features: GPT-NeoX) or
    the first of the whole head's (base^(-2i/d), i < r/2): base^(r/d) to the part.
    A half or quarter that is odd is rounded down to pairs (d = 6: 2 features).
    Empty where no even part smaller than d is rotated."""
    d = x.shape[-1]
    outs = []
    for r in sorted({d // 2 // 2 * 2, d // 4 // 2 * 2}, reverse=True):
        if r < 2:
            continue
        for b in (base, base ** (r / d)):
            turned = rotate(x[..., :r], positions, b)
            outs.append(torch.cat([turned, x.double()[..., r:]], dim=-1))
    return tuple(outs)


def course_encoder():
    """The notebook's encoder: a random ModernBERT with the course model's heads
    (3 layers: global, local, local; a window of 8)."""
    config = models.oracle_model().config
    H = config.num_attention_heads
    return _course_encoder(H, config.hidden_size // H, config.vocab_size)


@functools.lru_cache(maxsize=2)
def _course_encoder(H: int, d: int, vocab_size: int):
    return models.modern_bert(seed=12, num_heads=H, head_size=d, vocab_size=vocab_size)


def rotary_shape(fn) -> None:
    """rotary keeps the shape of (B, H, T, d) queries of the course model's sizes."""
    config = course_encoder().config
    d = config.hidden_size // config.num_attention_heads
    gen = torch.Generator().manual_seed(1200)
    x = torch.randn(1, config.num_attention_heads, 7, d, generator=gen)
    with LESSONS["rotary"].enforced():
        got = call(fn, x, torch.arange(7), 10000.0, name="rotary")
    expect_shape(
        got, x.shape, "rotary(q, positions)", N_("A rotation keeps the shape of x.")
    )


def rotary_modernbert(fn) -> None:
    """rotary equals ModernBERT's rotary embedding, both layer types' bases."""
    gen = torch.Generator().manual_seed(1201)
    for d, base in ((16, 10000.0), (32, 160000.0)):
        x = torch.randn(2, 3, 9, d, generator=gen)
        _expect_rotary(fn, x, torch.arange(9), base)


def rotary_random(fn, seed: int) -> None:
    """Other head sizes, bases, leading dims and positions that do not start at 0."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    for case in range(4):  # d = 2 has one pair: both layouts agree there, and
        with verdicts:  # on d = 6's partial part (its half rounded down to 2)
            d = rng.choice([8, 20, 64] if case == 0 else [2, 6, 8, 20, 64])
            T = rng.randint(2, 11)
            lead = rng.choice([(), (2,), (1, 3), (2, 2)])
            # the first case's base is not 10000: one that ignores `base` shows there
            base = rng.choice(
                [100.0, 160000.0] if case == 0 else [100.0, 10000.0, 160000.0]
            )
            start = rng.randint(1, 40)
            positions = torch.arange(start, start + 3 * T, 3)[
                torch.randperm(T, generator=gen)
            ]
            _expect_rotary(fn, torch.randn(*lead, T, d, generator=gen), positions, base)
    verdicts.fail_if_any()


# --- sliding windows ------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _modernbert_window(T: int, window: int) -> _Tensor:
    """Where a random ModernBERT's sliding-window layer lets each query look."""
    model = models.modern_bert(
        seed=T,
        num_layers=2,
        num_heads=1,
        head_size=8,
        local_attention=window,
        global_every=2,
    )
    ids = torch.randint(1, 100, (1, T), generator=torch.Generator().manual_seed(T))
    with torch.no_grad():
        probs = model(ids, output_attentions=True).attentions[1]  # (1, 1, T, T)
    return probs[0, 0] > 0


def _window_mistakes(T: int, window: int) -> list[dict[str, tuple[_Tensor, ...]]]:
    """The masks of the known mistakes: one, then two at once (a causal window
    that is also too wide or off by one, e.g. Mistral's ``0 <= i - j < window``)."""
    i = torch.arange(T)
    offset = i[:, None] - i[None, :]  # query - key
    half = window // 2
    right = offset.abs() <= half
    widths = {  # {verdict: (how far a query sees, as a mask of distances), ...}
        OFF_BY_ONE: (
            lambda o: o < half,
            lambda o: o <= half + 1,
        ),
        WHOLE_WINDOW: (  # the whole window each side, or window - 1 and the query
            lambda o: o <= window,
            lambda o: o < window,
        ),
    }
    back = offset >= 0  # a causal window: the query and the keys before it
    one = {
        verdict: tuple(reach(offset.abs()) for reach in reaches)
        for verdict, reaches in widths.items()
    }
    one |= {
        ONE_SIDED: (back & right,),
        INVERTED: (~right,),
        # an even window's -window // 2 is -(window // 2): nothing to name there
        NEGATIVE_FLOOR: (right | (offset == half + 1),) if window % 2 else (),
    }
    two = {
        both(ONE_SIDED, verdict): tuple(back & reach(offset) for reach in reaches)
        for verdict, reaches in widths.items()
    }
    return [one, two]


def _expect_mask(got, want: _Tensor, name: str, mistakes: list[dict]) -> None:
    got = expect_bool_mask(expect_shape(got, want.shape, name), name)
    if _equal(got, want):
        return
    for tier in mistakes:  # the fewest mistakes that give these places
        named = [m for m, wrongs in tier.items() if any(_equal(got, w) for w in wrongs)]
        if named:
            fail_mistaken(name, *named)
    q, k = (got != want).nonzero()[0].tolist()
    fail(
        "{name} differs from ModernBERT's window at {count} of {total} places, e.g. "
        "query {q}, key {k}: yours says {yours}.",
        name=name,
        count=int((got != want).sum()),
        total=want.numel(),
        q=q,
        k=k,
        yours=bool(got[q, k]),
    )


def _expect_window(fn, T: int, window: int) -> None:
    got = call(fn, T, window, name="sliding_window_mask")
    name = say("sliding_window_mask({T}, {window})", T=T, window=window)
    _expect_mask(got, _modernbert_window(T, window), name, _window_mistakes(T, window))


def sliding_window_mask_shape(fn) -> None:
    """sliding_window_mask gives a (T, T) bool tensor."""
    T, window = 12, course_encoder().config.local_attention
    got = call(fn, T, window, name="sliding_window_mask")
    name = "sliding_window_mask(T, window)"
    expect_bool_mask(expect_shape(got, (T, T), name), name)


def sliding_window_mask_modernbert(fn) -> None:
    """sliding_window_mask is where ModernBERT's local layers let queries look."""
    for T, window in ((12, 4), (10, 6)):
        _expect_window(fn, T, window)


def sliding_window_mask_random(fn, seed: int) -> None:
    """Other lengths and windows: odd ones, and windows wider than the text."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    for case in range(4):  # the first: a window narrower than the text
        with verdicts:
            window = rng.choice([3, 4, 5, 8] if case == 0 else [2, 3, 4, 5, 8, 30])
            low = window // 2 + 2 if case == 0 else 1
            _expect_window(fn, rng.randint(low, 20), window)
    with verdicts:  # and an odd window narrower than the text, whatever the draws
        window = rng.choice([3, 5, 7])
        _expect_window(fn, rng.randint(window // 2 + 2, 20), window)
    verdicts.fail_if_any()


# --- grouped-query attention ----------------------------------------------------


#: Where a call with 1 < H_kv < H fails: only there do the heads not broadcast.
NOT_SHARED = N_(
    "grouped_query_attention fails with {H_kv} K/V heads for {H} query heads: K "
    "and V must first have one head per query head, each K/V head repeated for "
    "the g = H / H_kv query heads it serves (repeat_interleave(g, dim=1)); only "
    "where H_kv is 1 or H do the heads broadcast as they are. {verdict}",
    mistake="kv-not-repeated",
)


#: Where a call raises with a mask and runs without it: the mask is the cause.
MASK_SHAPE_FAILS = N_(
    "grouped_query_attention fails with a mask of shape {shape} and runs without "
    "one: the mask must broadcast against your scores as they are shaped where "
    "you apply it (a (B, 1, T, T) mask against (B, H, T, T) scores; scores "
    "grouped as (B, H_kv, g, T, T) need it as (B, 1, 1, T, T)). {verdict}",
    mistake="gqa-mask-shape",
)


#: What torch says when .view cannot merge dims (after an expand or a transpose).


def _gqa_call(fn, Q, K, V, mask):
    """``fn(Q, K, V, mask)``; should it raise, the verdict names the input that
    made it: the mask (it runs without one) or K/V heads not repeated (it runs
    with them repeated), else the raise itself. A .view that cannot merge the
    dims it is given (the repeated heads of an expand) is the raise itself: with
    H_kv = H there are none to merge, so it would run, though the heads were
    repeated."""
    name, H, H_kv = "grouped_query_attention", Q.shape[1], K.shape[1]
    with LESSONS[name].enforced():
        try:
            return call(fn, Q, K, V, mask, name=name)
        except CheckFailed as err:
            if VIEW_FAILED in str(err):  # its own hint says why: not the heads
                raise  # nor the mask (repeated heads or none, it runs)
            if mask is not None and runs(fn, Q, K, V, None, name=name):
                fail(MASK_SHAPE_FAILS, shape=tuple(mask.shape), verdict=str(err))
            g = H // H_kv  # only where 1 < H_kv < H do the heads not broadcast
            repeated = (t.repeat_interleave(g, 1) for t in (K, V))
            if 1 < H_kv < H and runs(fn, Q, *repeated, mask, name=name):
                fail(NOT_SHARED, H=H, H_kv=H_kv, verdict=str(err))
            raise


BOOL_MULTIPLIED = N_(
    "the bool mask multiplied the scores: a blocked key's score becomes 0, and a "
    "score of 0 still gets weight. Fill the blocked scores instead: "
    "scores.masked_fill(~mask, float('-inf')).",
    mistake="bool-mask-multiplied",
)


#: A (B, 1, T, T) or (B, 1, 1, T) mask against scores grouped as (B, H_kv, g, T, T):
#: where B == H_kv it broadcasts, each example's mask on one group of heads.
MASK_BY_GROUP = N_(
    "the mask met your scores grouped as (B, H_kv, g, T, T) one dim off: its "
    "batch dim lined up with the K/V heads, so each group of query heads got "
    "another example's mask (where B differs from H_kv it raises instead). Give "
    "it a group dim first, mask.unsqueeze(2): (B, 1, 1, T, T).",
    mistake="gqa-mask-by-group",
)


def _gqa_steps(H: int, *, H_kv: int, d: int) -> list[Step]:
    """Grouped-query attention step by step (K/V heads repeated, scores scaled,
    masked, softmax, V weighed), with the ways each step goes wrong."""
    g = H // H_kv

    def repeated(tiled: str = ""):
        def way(st):  # tiled: the heads repeated whole, head h gets K/V head h % H_kv
            k, v = (
                st[n].repeat(1, g, 1, 1)
                if n in tiled
                else st[n].repeat_interleave(g, 1)
                for n in "kv"
            )
            return {**st, "k": k, "v": v}

        return way

    def by_group(st):  # a 4-D mask against (B, H_kv, g, T, T): its batch dim meets
        keep, (B, _, Tq, Tk) = st["keep"], st["scaled"].shape  # the K/V heads
        if keep is None or keep.dim() != 4 or keep.shape[0] != H_kv or H_kv == 1:
            return None
        grouped = torch.broadcast_to(keep[None], (B, H_kv, g, Tq, Tk))
        return fill.right({**st, "keep": grouped.reshape(B, H, Tq, Tk)})

    fill = steps_.fill_mask(
        ignored=MASK_IGNORED, multiplied=BOOL_MULTIPLIED, added=BOOL_ADDED
    )
    masks = {**fill.wrong, MASK_BY_GROUP: by_group}
    # tiled: K and V, or one of them (1 < H_kv < H: else tiling is right)
    tiled = {TILED: tuple(map(repeated, ("kv", "k", "v")))} if 1 < H_kv < H else {}
    return [
        Step(right=repeated(), wrong=tiled),
        steps_.scale(d, {NO_SCALE: 1.0, BY_D: float(d)}),
        Step(right=fill.right, wrong=masks),
        steps_.softmax({}),
        steps_.weigh(),
    ]


def _expect_gqa(fn, Q, K, V, mask, *, want=None, project=None, said=()) -> None:
    """Compare ``fn(Q, K, V, mask)`` (then ``project``, if given) with ``want``
    (default: transformers' eager attention with ``repeat_kv``); ``said``: the
    mistakes an earlier case named."""
    B, H, T, d = Q.shape
    got = _gqa_call(fn, Q, K, V, mask)
    name = "grouped_query_attention(Q, K, V, mask)"
    expect_shape(
        got, (B, H, T, d), name, N_("One context per query head: (B, H, T, d).")
    )
    if project is not None:
        got = project(got)
    start = {"q": Q.double(), "k": K.double(), "v": V.double(), "keep": mask}
    expect_close(
        got,
        eager_attention(Q, K, V, mask) if want is None else want,  # repeat_kv
        name,
        diagnose=lambda: mistaken(
            start,
            _gqa_steps(H, H_kv=K.shape[1], d=d),
            result=lambda st: st["c"] if project is None else project(st["c"]),
            said=said,
        ),
        what=say("the Llama layer's output")
        if project
        else say("transformers' repeat_kv attention"),
    )


def grouped_query_attention_shape(fn) -> None:
    """grouped_query_attention gives one context per query head."""
    gen = torch.Generator().manual_seed(1203)
    Q, K, V = (torch.randn(2, h, 5, 8, generator=gen) for h in (6, 2, 2))
    with LESSONS["grouped_query_attention"].enforced():
        got = call(fn, Q, K, V, None, name="grouped_query_attention")
    expect_shape(
        got,
        (2, 6, 5, 8),
        "grouped_query_attention(Q, K, V)",
        N_("One context per query head: (B, H, T, d)."),
    )


def _llama_case(H: int, H_kv: int, d: int, T: int, seed: int):
    """A random Llama's first attention layer on random hidden states: its rotated
    Q, K, V, the causal mask, its output and its output projection."""
    model = models.tiny_llama(seed=seed, num_heads=H, num_kv_heads=H_kv, head_size=d)
    attn = model.model.layers[0].self_attn
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(1, T, H * d, generator=gen)
    cos, sin = model.model.rotary_emb(hidden, torch.arange(T)[None])
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    with torch.no_grad():
        out, _ = attn(
            hidden,
            position_embeddings=(cos, sin),
            attention_mask=additive_mask(causal, torch.float32),
        )
        q, k, v = (
            proj(hidden).view(1, T, -1, d).transpose(1, 2)
            for proj in (attn.q_proj, attn.k_proj, attn.v_proj)
        )
        q, k = llama.apply_rotary_pos_emb(q, k, cos, sin)
    return q, k, v, causal, out, attn.o_proj


def grouped_query_attention_llama(fn) -> None:
    """grouped_query_attention, fed a Llama layer's rotated Q, K and V and followed
    by its output projection, gives the layer's own output."""
    for H, H_kv in ((4, 2), (6, 3), (4, 1)):
        q, k, v, causal, out, o_proj = _llama_case(H, H_kv, 8, 7, seed=H * 10 + H_kv)

        def project(context, o_proj=o_proj):
            B, _, T, _ = context.shape
            with torch.no_grad():
                return o_proj(context.transpose(1, 2).reshape(B, T, -1).float())

        _expect_gqa(fn, q, k, v, causal, want=out, project=project)


def _random_mask(gen, B: int, T: int, shape: str) -> _Tensor | None:
    if shape == "none":
        return None
    size = {
        "(T, T)": (T, T),
        "(B, 1, T, T)": (B, 1, T, T),
        "(B, 1, 1, T)": (B, 1, 1, T),
    }
    mask = torch.rand(*size[shape], generator=gen) < 0.6
    mask[..., 0] = True  # every query may attend somewhere
    mask[..., -1, -1] = False  # never all True: an ignored mask shows (T >= 2)
    return mask


def grouped_query_attention_random(fn, seed: int) -> None:
    """Other head counts (multi-query and plain multi-head too), sizes and masks."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    for case in range(4):  # the first: groups of several heads, several groups
        with verdicts:
            H_kv = rng.choice([2, 3] if case == 0 else [1, 2, 3])
            g = rng.choice([2, 4] if case == 0 else [1, 2, 4])
            B, T, d = rng.randint(1, 3), rng.randint(2, 9), rng.choice([4, 8, 16])
            shapes = ["(T, T)", "(B, 1, T, T)", "(B, 1, 1, T)"] + ["none"] * (case > 0)
            if case == 0:  # a mask with a batch dim over 2 or 3 examples that
                B, T, shapes = rng.randint(2, 3), rng.randint(3, 9), shapes[1:]
            Q = torch.randn(B, H_kv * g, T, d, generator=gen)
            K, V = (torch.randn(B, H_kv, T, d, generator=gen) for _ in range(2))
            shape = rng.choice(shapes)
            mask = _random_mask(gen, B, T, shape)
            if case == 0:  # differ (key 1 blocked in all but the first): a mask
                mask[0, ..., 1], mask[1:, ..., 1] = True, False  # that mixes them shows
            _expect_gqa(fn, Q, K, V, mask, said=verdicts.said)
    verdicts.fail_if_any()


# --- a ModernBERT layer's attention ---------------------------------------------


def attention_io(model, ids: _Tensor) -> list[tuple]:
    """What each attention module of a ModernBERT is given and returns when the
    model reads ``ids`` (forward hooks): ``[(attn, hidden in, output)]``."""
    seen = []
    hooks = [
        layer.attn.register_forward_hook(
            lambda m, args, kwargs, out: seen.append((m, args[0], out[0])),
            with_kwargs=True,
        )
        for layer in model.layers
    ]
    try:
        with torch.no_grad():
            model(ids)
    finally:
        for h in hooks:
            h.remove()
    return seen


def _layer_variant(attn, hidden: _Tensor, **change) -> _Tensor:
    """A ModernBERT attention module's output with things changed: ``theta``
    (the rotary base), ``windowed`` (apply the window or not), ``rotate_v``,
    ``rotate_k``, ``scale``, ``interleaved`` (GPT-J's and Llama's pairs),
    ``heads_first`` (Wqkv's output read as (H, 3, d)), ``whole_window``
    (local_attention keys on each side, not local_attention // 2); made from
    transformers' own pieces."""
    config, B, T, _ = attn.config, *hidden.shape
    kind = config.layer_types[attn.layer_idx]
    theta = change.get("theta", config.rope_parameters[kind]["rope_theta"])
    with torch.no_grad():
        qkv = attn.Wqkv(hidden).double()
        if change.get("heads_first"):  # read as (H, 3, d)
            qkv = qkv.view(B, T, -1, 3, attn.head_dim).transpose(2, 3)
        qkv = qkv.reshape(B, T, 3, -1, attn.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # 3 x (B, H, T, d)
        rotate = _interleaved if change.get("interleaved") else _rotated
        q_r = rotate(q, torch.arange(T), theta)
        k_r = rotate(k, torch.arange(T), theta) if change.get("rotate_k", True) else k
        if change.get("rotate_v"):
            v = rotate(v, torch.arange(T), theta)
        windowed = change.get("windowed", kind == "sliding_attention")
        mask = _modernbert_window(T, config.local_attention) if windowed else None
        if windowed and change.get("whole_window"):  # local_attention on each side
            i = torch.arange(T)
            mask = (i[:, None] - i[None, :]).abs() <= config.local_attention
        context = eager_attention(q_r, k_r, v, mask, scale=change.get("scale", True))
        return attn.Wo(context.transpose(1, 2).reshape(B, T, -1).to(hidden.dtype))


def _layer_mistakes(
    attn, hidden: _Tensor, said: tuple[str, ...] = ()
) -> list[dict[str, _Tensor]]:
    """One mistake's outputs, then two mistakes' (a tier each): every two of them
    that change different parts of the layer (``said``: the keys an earlier
    layer's verdict named, left out of a pair's verdict)."""
    config = attn.config
    kind = config.layer_types[attn.layer_idx]
    other = "full_attention" if kind == "sliding_attention" else "sliding_attention"
    T = hidden.shape[1]
    ways = {  # mistake -> what it changes (_layer_variant's arguments)
        ROPE_ON_V: {"rotate_v": True},
        K_NOT_ROTATED: {"rotate_k": False},
        NO_SCALE: {"scale": False},
        INTERLEAVED: {"interleaved": True},
    }
    if config.num_attention_heads > 1:  # with one head both layouts are the same
        ways[QKV_HEADS_FIRST] = {"heads_first": True}
    thetas = config.rope_parameters
    if thetas[other]["rope_theta"] != thetas[kind]["rope_theta"]:
        ways[WRONG_THETA] = {"theta": thetas[other]["rope_theta"]}
    if T > config.local_attention // 2 + 1:  # else the window blocks nothing
        if kind == "full_attention":
            ways[WINDOW_ON_GLOBAL] = {"windowed": True}
        else:
            ways[NO_WINDOW] = {"windowed": False}
            ways[WHOLE_WINDOW] = {"whole_window": True}
    diagnose = {m: _layer_variant(attn, hidden, **kw) for m, kw in ways.items()}
    pairs: dict[str, list] = {}  # two said mistakes can leave one verdict
    for a, b in itertools.combinations(ways, 2):
        if not {"windowed", "whole_window"} <= {*ways[a], *ways[b]}:
            value = _layer_variant(attn, hidden, **ways[a], **ways[b])
            pairs.setdefault(unsaid([a, b], said), []).append(value)
    return [diagnose, {key: tuple(values) for key, values in pairs.items()}]


def _expect_layer(fn, attn, hidden: _Tensor, want: _Tensor, said=()) -> None:
    name = say("modernbert_attention(attn, hidden) on layer {i}", i=attn.layer_idx)
    args = (attn, hidden.clone())
    with LESSONS["modernbert_attention"].enforced(args):
        got = call(fn, *args, name="modernbert_attention")
    expect_close(
        got,
        want,
        name,
        diagnose=lambda: _layer_mistakes(attn, hidden, said),
        what=say("the ModernBERT layer's own attention output"),
    )


def _cases(model, T: int, seed: int):
    ids = torch.randint(
        1,
        model.config.vocab_size,
        (1, T),
        generator=torch.Generator().manual_seed(seed),
    )
    return attention_io(model, ids)


def modernbert_attention_global(fn) -> None:
    """modernbert_attention gives a global layer's output (the notebook's encoder)."""
    encoder = course_encoder()
    for attn, hidden, out in _cases(encoder, 12, 1204):
        if encoder.config.layer_types[attn.layer_idx] == "full_attention":
            _expect_layer(fn, attn, hidden, out)


def modernbert_attention_local(fn) -> None:
    """modernbert_attention gives a sliding-window layer's output."""
    encoder = course_encoder()
    for attn, hidden, out in _cases(encoder, 12, 1205):
        if encoder.config.layer_types[attn.layer_idx] == "sliding_attention":
            _expect_layer(fn, attn, hidden, out)


def modernbert_attention_random(fn, seed: int) -> None:
    """Every layer of a random ModernBERT: other sizes, windows and layer patterns
    (3 layers: global and local ones, whichever layer is global)."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    window = rng.choice([2, 4, 6])
    model = models.modern_bert(
        seed=rng.randint(0, 999),
        num_layers=3,
        # several heads: with one, Wqkv's output read as (H, 3, d) is (3, H, d)
        num_heads=rng.choice([2, 3]),
        head_size=rng.choice([4, 8, 12]),
        local_attention=window,
        global_every=rng.choice([2, 3]),
    )
    T = rng.randint(window + 2, 14)
    kinds = model.config.layer_types
    cases = sorted(  # local layers first: every mistake shows there
        _cases(model, T, rng.randint(0, 99)),
        key=lambda case: kinds[case[0].layer_idx] == "full_attention",
    )
    for attn, hidden, out in cases:
        with verdicts:
            _expect_layer(fn, attn, hidden, out, said=verdicts.said)
    verdicts.fail_if_any()


# --- the cache's memory ---------------------------------------------------------


@functools.lru_cache(maxsize=16)
def _measured_cache(
    layers: int, kv_heads: int, d: int, T: int, batch: int, dtype: str
) -> int:
    """Bytes a random Llama's cache holds after reading ``batch`` texts of T tokens."""
    model = models.tiny_llama(
        seed=0,
        num_layers=layers,
        num_heads=2 * kv_heads,
        num_kv_heads=kv_heads,
        head_size=d,
    ).to(getattr(torch, dtype))
    ids = torch.randint(1, 100, (batch, T), generator=torch.Generator().manual_seed(T))
    with torch.no_grad():
        cache = model(ids, use_cache=True).past_key_values
    return sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)


#: A case of kv_cache_bytes: (layers, kv_heads, d, T, batch, dtype).
_CacheCase = tuple[int, int, int, int, int, str]


def _size(dtype: str) -> int:
    return torch.empty(0, dtype=getattr(torch, dtype)).element_size()


def _left_out(case: _CacheCase) -> dict[str, int]:
    """What each known mistake leaves out of the count: the factor it divides the
    measured bytes by (K and V: 2; bytes: bytes_per_value; the batch; the layers)."""
    layers, _, _, _, batch, dtype = case
    return {
        KV_ONLY_K: 2,
        KV_VALUES: _size(dtype),
        KV_NO_BATCH: batch,
        KV_NO_LAYERS: layers,
    }


def _divisors(cases: list[_CacheCase], chosen: tuple[str, ...]) -> tuple[int, ...]:
    """What an answer with the known mistakes of ``chosen`` divides the measured
    bytes of each of ``cases`` by."""
    return tuple(math.prod(_left_out(case)[m] for m in chosen) for case in cases)


def _told_apart(cases: list[_CacheCase]) -> bool:
    """Whether on ``cases`` every set of known mistakes gives other counts than
    every other set, and than the right ones: the factors they leave out (2, the
    bytes, the batch, the layers) do not multiply to the same on all of them."""
    known = tuple(_left_out(cases[0]))
    divisors = [
        _divisors(cases, chosen)
        for n in range(1, len(known) + 1)
        for chosen in itertools.combinations(known, n)
    ]
    ones = tuple(1 for _ in cases)
    return len(set(divisors)) == len(divisors) and ones not in divisors


def _cache_name(case: _CacheCase) -> str:
    layers, kv_heads, d, T, batch, dtype = case
    return say(
        "kv_cache_bytes({layers}, {kv_heads}, {d}, {T}, {batch}, {size})",
        layers=layers,
        kv_heads=kv_heads,
        d=d,
        T=T,
        batch=batch,
        size=_size(dtype),
    )


def _cache_bytes(fn, case: _CacheCase) -> int:
    """``fn``'s count on ``case``, failing unless it is a whole number."""
    layers, kv_heads, d, T, batch, dtype = case
    given = call(fn, layers, kv_heads, d, T, batch, _size(dtype), name="kv_cache_bytes")
    try:  # a whole number of any kind: int, numpy's (np.prod), a 0-d int tensor
        got = None if isinstance(given, bool) else operator.index(given)
    except TypeError:
        got = None
    if got is None:
        fail(
            "{name} should be an int, but it is a {type_name}.",
            name=_cache_name(case),
            type_name=type(given).__name__,
        )
    return got


def _expect_cache_cases(fn, cases: list[_CacheCase]) -> None:
    """kv_cache_bytes on every case: where its counts are wrong, the fewest known
    mistakes that give all of them are named (ties: each); else each wrong case's
    own verdict."""
    got = tuple(_cache_bytes(fn, case) for case in cases)
    want = tuple(_measured_cache(*case) for case in cases)
    if got == want:
        return
    wrong = next(case for case, g, w in zip(cases, got, want, strict=True) if g != w)
    fits = fewest(
        tuple(_left_out(cases[0])),
        lambda chosen: (
            got
            == tuple(
                w // by for w, by in zip(want, _divisors(cases, chosen), strict=True)
            )
        ),
    )
    if fits:  # said on a case where each mistake of the first shows
        shown = next(
            (c for c in cases if all(_left_out(c)[m] > 1 for m in fits[0])), wrong
        )
        fail_mistaken(_cache_name(shown), *(both(*chosen) for chosen in fits))
    verdicts = CaseVerdicts()
    for case, g, w in zip(cases, got, want, strict=True):
        with verdicts:
            expect_equal(
                g,
                w,
                _cache_name(case),
                N_("The number is what a Llama's cache measures."),
            )
    verdicts.fail_if_any()


def kv_cache_bytes_llama(fn) -> None:
    """kv_cache_bytes is what a random Llama's cache measures, float32 and bfloat16."""
    _expect_cache_cases(fn, [(2, 2, 8, 9, 3, "float32"), (3, 1, 16, 5, 2, "bfloat16")])


def kv_cache_bytes_random(fn, seed: int) -> None:
    """Other layer counts, K/V head counts, sizes, lengths and batches: drawn so
    that the known mistakes, alone or together, give counts of their own."""
    rng = random.Random(seed)
    for _ in range(100):  # at most 9 draws over 2000 seeds; else the last draw
        cases = [
            (
                rng.randint(1, 4),
                rng.choice([1, 2, 3]),
                rng.choice([4, 8]),
                rng.randint(2, 12),
                rng.randint(1, 4),
                rng.choice(["float32", "bfloat16"]),
            )
            for _ in range(3)
        ]
        if _told_apart(cases):
            break
    _expect_cache_cases(fn, cases)
