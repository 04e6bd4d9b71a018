"""Checks for 11_debugging.

Oracles: torch's softmax over the allowed keys (float64, taken at import:
:func:`masked_oracle`, which the checks of ``masked_softmax`` use too), the
model's own attentions on a padded batch (for the key mask and the head split),
and ``nn.TransformerEncoderLayer`` (a position table must break its symmetry).

The memory fix, ``chunked_attention``: its oracle is torch's fused
``scaled_dot_product_attention`` (taken at import), which the exercise turns off
while the student's code runs. Memory: every tensor that any torch operation makes
during the call is measured (a ``TorchDispatchMode``), so the check sees a whole
(Tq, Tk) matrix whatever code built it (``@``, einsum, ``torch.cat`` of pieces, a
Python loop over rows excepted, which is slow but fine).
"""

from __future__ import annotations

import math
import random

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from ..hints import hint as hint  # the notebook's check.hint("<exercise>")
from ..i18n import N_, say, with_keys
from ..worked import worked as worked  # check.worked("<exercise>"), once tried
from . import (
    call,
    expect_close,
    expect_finite,
    expect_shape,
    fail,
    is_close,
)
from .calls import CaseVerdicts, CheckFailed, both
from .compare import expect_bool_mask, fail_laid_out, fail_mistaken
from .lessons import FUSED_ATTENTION, Lesson
from .mistaken import unsaid
from .oracles import (
    BY_D,
    FUSED,
    HEADS_D_T,
    LAST_DIM,
    NO_SCALE,
    PER_BLOCK,
    course_case,
    random_cases,
)

_sdpa = F.scaled_dot_product_attention
LESSONS = {"chunked_attention": Lesson(FUSED, FUSED_ATTENTION)}

KEYS_INVERTED = N_(
    "the mask is inverted: it is True at the padding. attention_mask is 1 at "
    "real tokens, and True must mean may attend.",
    mistake="padding-inverted",
)
MIXED = N_(
    "x.view(B, H, T, d) reads each token's features as if they were laid out "
    "head by head across tokens, so heads and tokens are mixed. View as (B, "
    "T, H, d), then transpose(1, 2).",
    mistake="view",
)


#: T on the query axis: the mask picks whole rows of queries, not keys.
ON_QUERIES = N_(
    "key_mask gives shape {got}, T on the query axis (B, 1, T, 1), so the mask "
    "picks queries and padded keys still get weight. The keys are the last axis "
    "of the (B, H, T, T) scores: (B, 1, 1, T) = {want}.",
    mistake="key-mask-on-queries",
)


def _layout_verdict(got, B: int, T: int, scores_shape) -> str:
    """What is wrong with the shape of a key mask ``got`` (any dtype), said; ""
    if it lines up with the keys of scores of ``scores_shape``."""
    try:
        torch.broadcast_to(got, scores_shape)
    except RuntimeError:
        broadcasts = False
    else:
        broadcasts = True
    if broadcasts and tuple(got.shape[-3:-1]) in {(1, 1), ()}:
        return ""
    fields = {"got": tuple(got.shape), "want": (B, 1, 1, T)}
    if T > 1 and tuple(got.shape) == (B, 1, T, 1):
        return say(ON_QUERIES, **fields)
    return say(
        "key_mask gives shape {got}; it should be (B, 1, 1, T) = {want}, so that "
        "it broadcasts over heads and queries.",
        mistake="shape",
        **fields,
    )


def _expect_key_mask(fn, case) -> None:
    got = call(fn, case.mask.clone(), name="key_mask")
    q, k, _ = case.qkv()  # (B, H, T, d)
    scores = q @ k.mT / math.sqrt(case.d)  # (B, H, T, T)
    B, T = case.mask.shape
    try:
        got = expect_bool_mask(got, "key_mask(attention_mask)")
    except CheckFailed as err:  # a 0/1 mask: its layout may be wrong too
        is_tensor = isinstance(got, torch.Tensor)
        layout = _layout_verdict(got, B, T, scores.shape) if is_tensor else ""
        if not layout:
            raise
        fail(both(with_keys(str(err), err.mistakes), layout))
    layout = _layout_verdict(got, B, T, scores.shape)
    if layout:
        fail(layout)
    full = torch.broadcast_to(got, scores.shape)
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
    verdicts = CaseVerdicts()
    for case in random_cases(seed):
        with verdicts:
            _expect_key_mask(fn, case)
    verdicts.fail_if_any()


TRANSPOSED_FIRST = N_(
    "the transpose came before the reshape: (B, D, T) reshaped to (B, H, T, d) "
    "gives each head its own features, but lays them out feature by feature, so "
    "its rows are no longer tokens. Reshape to (B, T, H, d) first, then swap T "
    "and H.",
    mistake="transpose-before-reshape",
)


#: A split laid out (B, H, d, T) that is still wrong with T and d swapped back.
SWAPPED_BACK_OFF = N_(
    "with T and d swapped back, the attention of your split Q and K still does "
    "not match the model's attentions: the largest difference is {max_diff:.3g}."
)


def _split_attention(q, k, case):
    """The masked attention of split Q and K (B, H, T, d), in float64."""
    allowed = case.mask.bool()[:, None, None, :]
    return masked_oracle(q @ k.mT / math.sqrt(case.d), allowed)


def _split_mistakes(x, case) -> dict:
    """``{verdict: attention}`` of the known wrong splits of Q and K ``x``; where
    T == d, also the right split and each wrong one laid out (B, H, d, T), which
    then has the right shape and only its values tell."""
    B, T, D = case.hidden.shape
    view = [t.reshape(B, case.H, T, case.d) for t in x]  # the bug, for its message
    first = [t.transpose(1, 2).reshape(B, case.H, T, case.d) for t in x]
    wrong = {MIXED: view, TRANSPOSED_FIRST: first}
    if T == case.d:
        swapped = {HEADS_D_T: case.qkv()[:2]}
        swapped |= {both(HEADS_D_T, m): v for m, v in wrong.items()}
        wrong |= {m: [t.mT for t in v] for m, v in swapped.items()}
    return {m: _split_attention(*qk, case) for m, qk in wrong.items()}


def _expect_not_d_t(got, x, case) -> None:
    """Name a split laid out (B, H, d, T) (T and d swapped, e.g. by permute(0, 2,
    3, 1), GPT-2's layout for keys), and go on judging it with T and d swapped
    back, so that a second mistake is named too."""
    B, T, D = case.hidden.shape
    d_t = (B, case.H, case.d, T)
    if T == case.d:  # the right shape: the values tell (_split_mistakes)
        return
    laid = [isinstance(g, torch.Tensor) and tuple(g.shape) == d_t for g in got]
    if not any(laid):
        return
    which = next(g for g, is_d_t in zip(got, laid, strict=True) if is_d_t)
    layout = say(
        "{name} has shape {got}; {why}",
        name="fixed_split_heads(x, num_heads)",
        got=tuple(which.shape),
        why=HEADS_D_T,
    )
    if not all(laid):
        fail(layout)
    back = _split_attention(got[0].mT, got[1].mT, case)
    fail_laid_out(
        layout, back, case.probs, _split_mistakes(x, case), off=SWAPPED_BACK_OFF
    )


def _expect_split(fn, case) -> None:
    B, T, D = case.hidden.shape
    with torch.no_grad():
        x = case.self_attn.query(case.hidden), case.self_attn.key(case.hidden)
    got = [call(fn, t.clone(), case.H, name="fixed_split_heads") for t in x]
    _expect_not_d_t(got, x, case)
    for g in got:
        expect_shape(g, (B, case.H, T, case.d), "fixed_split_heads(x, num_heads)")
    expect_close(
        _split_attention(got[0], got[1], case),
        case.probs,
        say("the attention of your split Q and K"),
        diagnose=lambda: _split_mistakes(x, case),
        what=say("the model's attentions"),
    )


def fixed_split_heads_values(fn) -> None:
    """Layer 0's Q and K of the course model, split: the model's attentions."""
    _expect_split(fn, course_case(padded=True))


def fixed_split_heads_random(fn, seed: int) -> None:
    """Tiny BERTs with other head counts (two or more: one head hides the bug)."""
    verdicts = CaseVerdicts()
    for case in random_cases(seed, heads=(2, 3, 4)):
        with verdicts:
            _expect_split(fn, case)
    verdicts.fail_if_any()


#: A table of (sin, cos) pairs that raises where d_model is odd.
ODD_WIDTH = N_(
    "position_table({T}, {D}) fails for an odd d_model, and position_table({T}, "
    "{even}) runs: sines and cosines in pairs fill an even number of columns, one "
    "more than an odd d_model, so make the pairs for (d_model + 1) // 2 "
    "frequencies and keep the first d_model columns. {verdict}",
    mistake="odd-width",
)


def _table(fn, T: int, D: int):
    """``fn(T, D)``; where it raises for an odd ``D`` and runs for ``D + 1``, the
    verdict says what an odd width needs."""
    try:
        return call(fn, T, D, name="position_table")
    except CheckFailed as err:
        if D % 2 == 0:
            raise
        try:
            call(fn, T, D + 1, name="position_table")
        except CheckFailed:
            raise err from None
        fail(ODD_WIDTH, T=T, D=D, even=D + 1, verdict=str(err))


def _expect_table(fn, T: int, D: int) -> torch.Tensor:
    got = _table(fn, T, D)
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
            mistake="too-large",
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
    first table is long enough (20 to 40 rows) for values that grow to show; the
    last is of an odd width."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    for i in range(4):
        with verdicts:
            # the last width is odd: a table of sines and cosines in pairs must
            # still have d_model columns, not d_model + 1
            widths = [7, 9, 33] if i == 3 else [8, 16, 24, 64]
            T, D = rng.randint(20 if i == 0 else 2, 40), rng.choice(widths)
            table = _expect_table(fn, T, D)
            if not _breaks_symmetry(table, seed + i):
                fail(
                    "With position_table({T}, {D}) added, a transformer "
                    "layer still gives the same outputs, reordered, for "
                    "reordered tokens.",
                    T=T,
                    D=D,
                )
    verdicts.fail_if_any()


# --- the first fix: masked_softmax, and the oracle the later checks share -------------


_softmax = torch.softmax

NAN_ROWS = N_(
    "a row whose keys are all masked gives NaN: softmax of a row of -inf is "
    "0/0. Give such rows zeros.",
    mistake="nan-rows",
)
LEAKS = N_(
    "a row whose keys are all masked still spreads weight over them (a large "
    "negative fill or bias leaves a softmax of equal, or shifted, scores); "
    "it should be all zeros.",
    mistake="empty-rows-weight",
)
INVERTED = N_(
    "the mask is inverted: True means the query may attend that key, so fill "
    "where the mask is False.",
    mistake="fill-inverted",
)
HALF = N_(
    "in float16 an allowed key gives NaN. 0 * -inf is NaN, so an additive mask "
    "built from -inf, or from -1e9 made a float16 tensor (it rounds to -inf: "
    "float16 stops at 65504), poisons the allowed keys; and exp() of large "
    "float16 scores overflows to inf. Fill the blocked scores with masked_fill "
    "or where and torch.finfo(scores.dtype).min, and take the softmax with "
    "torch.softmax or in float32.",
    mistake="half",
)


#: BERT's additive -10000 as a fill: far enough below scores of about 1, not below
#: large ones.
FILL_NOT_LOW = N_(
    "the blocked scores were filled with -1e4, which is not far enough below the "
    "scores: in a row whose allowed scores are all below -1e4 the blocked keys take "
    "the weight. Fill with the dtype's lowest number, torch.finfo(scores.dtype).min "
    "(or with -inf, and give the rows with no allowed key zeros).",
    mistake="fill-not-low-enough",
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
    wrong = {
        INVERTED: torch.nan_to_num(_softmax(s, dim)),
        FILL_NOT_LOW: _fixed_fill(scores, full, dim),
    }
    pairs = {}  # tried only where no one mistake gives the numbers
    if dim % scores.dim() != scores.dim() - 1:
        wrong[LAST_DIM] = masked_oracle(scores, mask, -1)
        pairs[both(LAST_DIM, INVERTED)] = torch.nan_to_num(_softmax(s, -1))
        pairs[both(LAST_DIM, FILL_NOT_LOW)] = _fixed_fill(scores, full, -1)
    expect_close(
        got, want, name, atol=tol, rtol=tol, diagnose=[wrong, pairs], what="torch"
    )


def _fixed_fill(scores, mask, dim: int, fill: float = -1e4) -> tuple:
    """Softmax of the scores with the blocked ones filled with ``fill`` (in the
    scores' dtype): the rows with no allowed key zeroed, or left uniform, or the
    blocked weights zeroed after the softmax (times the mask)."""
    p = _softmax(scores.masked_fill(~mask, fill).double(), dim)
    return p.masked_fill(~mask.any(dim, keepdim=True), 0.0), p, p * mask


def _sink_row(gen, scores, mask, dim: int) -> None:
    """Make the first row along ``dim`` hold an allowed and a blocked key, and every
    score of it about -2e4 (float16 holds it): far below the others, so that a
    fill that is not the dtype's lowest (-1e4) gives that row's weight to the
    blocked keys."""
    row = (0,) * (scores.dim() - 1)
    allowed = mask.movedim(dim, -1)[row]  # views: written in place
    allowed[0], allowed[-1] = True, False
    sunk = scores.movedim(dim, -1)[row]
    sunk.copy_(-2e4 - 5e3 * torch.rand(sunk.shape, generator=gen, dtype=torch.float64))


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
    """Other shapes, dims, dtypes and broadcast masks; a row of one case far below
    -1e4, where only the dtype's lowest number (or -inf) is low enough a fill."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    for i in range(5):
        with verdicts:
            shape = [rng.randint(1, 4) for _ in range(rng.randint(1, 2))]
            shape += [rng.randint(2, 9), rng.randint(2, 9)]
            dtypes = [torch.float16, torch.float32, torch.float64]
            dtype = torch.float16 if i == 4 else rng.choice(dtypes)  # float16 once
            scale = 1e4 if dtype == torch.float16 else rng.choice([1.0, 1e3, 1e6])
            mask_shape = list(shape)
            mask_shape[rng.randrange(len(shape) - 2)] = 1  # broadcast over a batch dim
            mask = torch.rand(mask_shape, generator=gen) < 0.6
            dim = rng.choice([-1, -1, len(shape) - 2])
            if i == 2:  # plain scores over a dim before the last: a fixed dim -1 shows
                dtype, scale, dim = torch.float32, 3.0, len(shape) - 2
            if i == 3:  # the sink row below along the last dim, which a fixed dim
                dim = -1  # reduces too: a weak fill shows beside it
            if i < 2:  # a first row with nothing allowed, a last one with something
                index, other = [slice(None)] * mask.dim(), -2 if dim == -1 else -1
                index[other] = 0
                mask[tuple(index)] = False
                index[other], index[-3 - other] = -1, 0
                mask[tuple(index)] = True
            scores = _scores(gen, shape, scale, dtype=dtype)
            if i == 3:  # a row far below -1e4: a fill of -1e4 gives it to the blocked
                _sink_row(gen, scores, mask, dim)
            _expect_masked(fn, scores, mask, dim)
    verdicts.fail_if_any()


# The memory fix: chunked_attention.

#: A running max that starts at -inf and is used as it is: where a query's first
#: block of keys is all masked, exp(-inf - (-inf)) is NaN for the whole row.
MASKED_FIRST_BLOCK = N_(
    "a query whose first block of keys is all masked gets NaN: its running max "
    "is still -inf there, and exp(-inf - (-inf)) is NaN. Subtract 0 where the "
    "max is -inf (that block adds nothing) and keep every running value finite.",
    mistake="masked-first-block",
)


#: The mask never applied: every key weighed, the blocked ones too.
MASK_IGNORED = N_(
    "the mask is ignored: keys the mask blocks (False) still get weight. Fill "
    "their scores with -inf in each block before its max and its exp.",
    mistake="chunk-mask-ignored",
)


#: A running max kept, but what earlier blocks added never rescaled when it grew.
NOT_RESCALED = N_(
    "the running sums were not rescaled when the running max grew: each block's "
    "exp(s - max) uses the max so far, but what earlier blocks added used a smaller "
    "one. Multiply the running sum and the running context by exp(old max - new "
    "max) before adding a block.",
    mistake="not-rescaled",
)


#: The running sum rescaled when the max grew, the running context not.
CONTEXT_NOT_RESCALED = N_(
    "the running context was not rescaled when the running max grew (the running "
    "sum was): what earlier blocks added to it was taken against a smaller max, so "
    "it mixes terms of different scales. Multiply the context by the same exp(old "
    "max - new max) as the sum before adding a block.",
    mistake="context-not-rescaled",
)


#: The running context rescaled when the max grew, the running sum not.
SUM_NOT_RESCALED = N_(
    "the running sum (the softmax's denominator) was not rescaled when the running "
    "max grew (the running context was): what earlier blocks added to it was taken "
    "against a smaller max. Multiply the sum by the same exp(old max - new max) as "
    "the context before adding a block.",
    mistake="sum-not-rescaled",
)


#: The loop stops before a last block shorter than chunk_size.
LAST_BLOCK_DROPPED = N_(
    "the last block of keys was left out: where chunk_size does not divide Tk the "
    "last block is shorter, and range(0, Tk, chunk_size) still reaches it (a stop "
    "of Tk - chunk_size + 1, or Tk // chunk_size blocks, misses it).",
    mistake="last-block-dropped",
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


def _not_rescaled(
    Q, K, V, *, chunk: int, mask=None, sum_too: bool = False, context_too=False
) -> tuple[torch.Tensor, ...]:
    """The misconception: a running max, but the running context and sum never
    rescaled when it grows (the sum is, with ``sum_too``: then the context mixes
    terms taken against different maxima; the context is, with ``context_too``:
    then the sum does). With a mask, a query whose blocks so far were all masked
    has a max of -inf: used as it is (NaN), or replaced by 0 (a guard)."""
    outs = []
    for guard in (False, True) if mask is not None else (False,):
        peak = torch.full((*Q.shape[:-1], 1), -math.inf, dtype=torch.float64)
        mass, ctx = torch.zeros_like(peak), 0.0  # ctx (..., Tq, d) once added to
        for j in range(0, K.shape[-2], chunk):
            k, v = (x[..., j : j + chunk, :].double() for x in (K, V))
            s = Q.double() @ k.mT / math.sqrt(Q.shape[-1])  # (..., Tq, c)
            if mask is not None:
                s = s.masked_fill(~mask[..., j : j + chunk], -math.inf)
            old, peak = peak, torch.maximum(peak, s.amax(-1, keepdim=True))
            base = peak.masked_fill(peak == -math.inf, 0) if guard else peak
            w = torch.exp(s - base)
            if sum_too:
                mass = mass * torch.exp(old - base)
            if context_too:
                ctx = ctx * torch.exp(old - base)
            mass, ctx = mass + w.sum(-1, keepdim=True), ctx + w @ v
        outs.append(ctx / mass)
    return tuple(outs)


def _without_last_block(Q, K, V, *, chunk: int, mask=None) -> tuple:
    """The misconception: only the whole blocks of keys. Where no key is left (or
    none allowed), ways of writing it give NaN (0/0) or zeros."""
    kept = K.shape[-2] // chunk * chunk
    if kept == 0:
        zeros = torch.zeros(*Q.shape[:-1], V.shape[-1], dtype=torch.float64)
        return zeros, torch.full_like(zeros, math.nan)
    if mask is None:
        return (oracle(Q, K[..., :kept, :], V[..., :kept, :]),)
    mask = torch.broadcast_to(mask, (*Q.shape[:-1], K.shape[-2]))[..., :kept]
    out = oracle(Q, K[..., :kept, :], V[..., :kept, :], mask)
    empty = ~mask.any(-1, keepdim=True)  # (..., Tq, 1): no allowed key kept
    return out.masked_fill(empty, 0.0), out.masked_fill(empty, math.nan)


#: Where the answer raised on keys that chunk_size does not divide, and ran on the
#: same keys cut to a whole number of blocks.
UNEVEN_BLOCKS = N_(
    "chunked_attention fails when chunk_size={chunk} does not divide Tk={Tk}, and "
    "runs when the keys are cut to a whole number of blocks: the last block is "
    "shorter (Tk % chunk_size keys), so slice the blocks, K[..., start:start + "
    "chunk_size, :], rather than reshape the keys into equal ones. {verdict}",
    mistake="uneven-blocks",
)


def _run(fn, Q, K, V, *, chunk: int, mask=None):
    args = (Q.clone(), K.clone(), V.clone(), chunk)
    kwargs = {} if mask is None else {"mask": mask.clone()}
    try:
        with LESSONS["chunked_attention"].enforced(args):
            got = call(_measured(fn), *args, name="chunked_attention", **kwargs)
    except CheckFailed as err:
        Tk = K.shape[-2]
        whole = Tk - Tk % chunk  # the keys that fill whole blocks
        if (
            Tk % chunk
            and whole
            and _runs(fn, Q, K, V, chunk=chunk, mask=mask, keys=whole)
        ):
            fail(UNEVEN_BLOCKS, chunk=chunk, Tk=Tk, verdict=str(err))
        raise
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        fail("chunked_attention should return one tensor, the context.")
    return got


def _runs(fn, Q, K, V, *, chunk: int, mask, keys: int) -> bool:
    """Whether ``fn`` runs on the first ``keys`` keys (and mask columns) alone."""
    try:
        _run(
            fn,
            Q,
            K[..., :keys, :],
            V[..., :keys, :],
            chunk=chunk,
            mask=None if mask is None else mask[..., :keys],
        )
    except CheckFailed:
        return False
    return True


def _wrong(Q, K, V, *, chunk: int, mask=None, said=()) -> list[dict]:
    """What each named misconception would return, then each pair of them: a
    wrong scale (none, or 1/d) beside a misconception of the blocks or a mask
    ignored, and a mask ignored beside a misconception of the blocks. A pair
    leaves out the mistakes ``said`` (keys an earlier case named)."""
    d = Q.shape[-1]
    scales = {NO_SCALE: Q * math.sqrt(d), BY_D: Q / math.sqrt(d)}  # Q·K / sqrt(d)
    masks = {None: mask}
    if mask is not None and not bool(mask.all()):
        masks[MASK_IGNORED] = None
    wrong, pairs = {}, {}
    for scale, q in {None: Q, **scales}.items():
        for ignored, m in masks.items():
            named = [v for v in (scale, ignored) if v is not None]
            if named:
                tier = wrong if len(named) == 1 else pairs
                tier[unsaid(named, said)] = oracle(q, K, V, m)
            if len(named) < 2:
                for verdict, value in _blockwise(q, K, V, chunk=chunk, mask=m).items():
                    tier = wrong if not named else pairs
                    tier[unsaid([*named, verdict], said)] = value
    return [wrong, pairs]


def _blockwise(Q, K, V, *, chunk: int, mask=None) -> dict:
    """What each misconception of the blocks would return."""
    wrong = {}
    if K.shape[-2] % chunk:
        wrong[LAST_BLOCK_DROPPED] = _without_last_block(Q, K, V, chunk=chunk, mask=mask)
    if chunk < K.shape[-2]:
        wrong[PER_BLOCK] = _per_block(Q, K, V, chunk=chunk, mask=mask)
        wrong[NOT_RESCALED] = _not_rescaled(Q, K, V, chunk=chunk, mask=mask)
        wrong[CONTEXT_NOT_RESCALED] = _not_rescaled(
            Q, K, V, chunk=chunk, mask=mask, sum_too=True
        )
        wrong[SUM_NOT_RESCALED] = _not_rescaled(
            Q, K, V, chunk=chunk, mask=mask, context_too=True
        )
        if mask is not None:
            first = torch.broadcast_to(mask, (*Q.shape[:-1], K.shape[-2]))
            empty = ~first[..., :chunk].any(-1, keepdim=True)  # (..., Tq, 1)
            if bool(empty.any()):
                right = oracle(Q, K, V, mask)
                wrong[MASKED_FIRST_BLOCK] = right.masked_fill(empty, math.nan)
    return wrong


def _expect_values(fn, Q, K, V, *, chunk: int, mask=None, said=()) -> None:
    out, _ = _run(fn, Q, K, V, chunk=chunk, mask=mask)
    name = say(
        "chunked_attention with Tk={Tk}, chunk_size={chunk}",
        Tk=K.shape[-2],
        chunk=chunk,
    )
    expect_close(
        out,
        oracle(Q, K, V, mask),
        name,
        diagnose=lambda: _wrong(Q, K, V, chunk=chunk, mask=mask, said=said),
        what="torch",
    )


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
    want = oracle(Q, K, V)
    out = expect_shape(out, want.shape, "chunked_attention(Q, K, V, 128)")
    if is_close(out, want):
        return
    tries = [
        value
        for tier in _wrong(Q, K, V, chunk=128)  # one mistake, then two
        for wrong in tier.values()
        for value in (wrong if isinstance(wrong, tuple) else (wrong,))
    ]
    if not any(is_close(out, t) for t in tries):
        fail("chunked_attention does not compute attention (compare with torch's).")


def chunked_attention_random(fn, seed: int) -> None:
    """Random shapes, chunk sizes (1 to more than Tk), masks and dtypes.

    The first case always splits the keys into several blocks, the last one
    shorter, and has no mask, so that blocks normalised on their own, and blocks
    assumed equal, are caught whatever the seed. The last
    case always has a dense random mask, small blocks and a query that may attend
    nothing in the first block, so that a running max left at -inf (NaN) is too.
    """
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    for case in range(5):
        with verdicts:
            split = case == 0
            batch = tuple(rng.randint(1, 3) for _ in range(rng.randint(0, 2)))
            Tq, Tk, d = (
                rng.randint(1, 9),
                rng.randint(1 + 2 * split, 20),
                rng.choice([2, 4, 8]),
            )
            # the first case's blocks never divide Tk: the last one is shorter
            uneven = [c for c in range(2, Tk) if Tk % c]
            chunk = rng.choice(uneven) if split else rng.randint(1, Tk + 3)
            dtype = rng.choice([torch.float32, torch.float64])
            Q, K, V = _qkv(gen, batch, Tq=Tq, Tk=Tk, d=d, dtype=dtype)
            masked = not split and rng.random() < 0.5
            mask = _mask(gen, batch, Tq=Tq, Tk=Tk, chunk=chunk) if masked else None
            _expect_values(fn, Q, K, V, chunk=chunk, mask=mask, said=verdicts.said)
    batch = tuple(rng.randint(1, 3) for _ in range(rng.randint(0, 2)))
    Tq, Tk, d = rng.randint(1, 9), rng.randint(4, 20), rng.choice([2, 4, 8])
    chunk = rng.randint(1, Tk // 2)
    dtype = rng.choice([torch.float32, torch.float64])
    Q, K, V = _qkv(gen, batch, Tq=Tq, Tk=Tk, d=d, dtype=dtype)
    with verdicts:
        mask = _mask(gen, batch, Tq=Tq, Tk=Tk, chunk=chunk)
        _expect_values(fn, Q, K, V, chunk=chunk, mask=mask, said=verdicts.said)
    verdicts.fail_if_any()
