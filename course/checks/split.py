"""Checks for 04_split_heads: heads as a tensor dimension.

Oracle: head h of a (B, T, D) tensor is its feature block h*d:(h+1)*d (how the fused
projection lays heads out, see 03), and bertviz's neuron-view queries for the model.
"""

from __future__ import annotations

import random

import torch

from .. import data, models
from ..hints import hint as hint  # the notebook's check.hint("<exercise>")
from ..i18n import N_, say
from ..worked import worked as worked  # check.worked("<exercise>"), once tried
from . import SAMPLE_TEXTS, call, expect_close, expect_shape, fail
from .calls import CaseVerdicts, both
from .compare import fail_laid_out
from .oracles import HEADS_D_T, sample_qk

NO_TRANSPOSE = N_(
    "view(B, H, T, d) without a transpose mixes heads: split the last dim "
    "into (H, d) first, then swap T and H.",
    mistake="split-no-transpose",
)
WRONG_AXIS = N_(
    "the last dim was split as (d, H) instead of (H, d): head h owns the "
    "contiguous block h*d:(h+1)*d.",
    mistake="d-h",
)
MERGE_ORDER = N_(
    "reshaping (B, H, T, d) straight to (B, T, D) mixes tokens and heads: "
    "transpose back to (B, T, H, d) first.",
    mistake="merge-no-transpose",
)


#: A split laid out (B, H, d, T) that is still wrong with T and d swapped back.
SWAPPED_BACK_OFF = N_(
    "with T and d swapped back, {name} still does not match {what}: the largest "
    "difference is {max_diff:.3g}."
)

#: A split laid out (B*H, T, d), batch and heads in one dim (d2l's transpose_qkv):
#: said after "{name} has shape {got};".
BATCH_HEADS_MERGED = N_(
    "batch and heads merged into one dim, (B*H, T, d), as d2l's transpose_qkv "
    "does; keep them apart: (B, H, T, d).",
    mistake="batch-heads-merged",
)
#: A split laid out (B*H, T, d) that is still wrong once batch and heads are apart.
MERGED_APART_OFF = N_(
    "with batch and heads apart again, {name} still does not match {what}: the "
    "largest difference is {max_diff:.3g}."
)

MERGE_D_H = N_(
    "the features were laid out as (d, H), a head's features interleaved with the "
    "others': permute to (B, T, H, d) before flattening.",
    mistake="merge-d-h",
)

#: A loop over heads or tokens that stops one short, or starts at 1.
LEFT_ZERO = N_(
    "the last (or the first) head or token was never written and is still 0: a "
    "loop that stops one short (range(n - 1)) or starts at 1.",
    mistake="left-zero",
)


def _one_short(value: torch.Tensor, blocks: dict[int, int]) -> tuple:
    """``value`` with its last, then its first, block along each dim of
    ``blocks`` (``{dim: block size}``) left 0: what a loop over the heads or the
    tokens that stops one short, or starts at 1, gives on a zeroed output."""
    out = []
    for dim, size in blocks.items():
        n = value.shape[dim]
        for start in {n - size, 0} if n > size else ():
            short = value.clone()
            short.narrow(dim, start, size).zero_()
            out.append(short)
    return tuple(out)


def _with_one_short(diagnose: dict, want: torch.Tensor, blocks: dict) -> list:
    """Tiers for ``expect_close``: ``diagnose`` and a part of ``want`` left 0,
    then each of ``diagnose``'s mistakes with a part left 0 as well."""
    single = {**diagnose, LEFT_ZERO: _one_short(want, blocks)}
    pairs = {both(m, LEFT_ZERO): _one_short(w, blocks) for m, w in diagnose.items()}
    return [single, pairs]


def _by_blocks(x: torch.Tensor, H: int) -> torch.Tensor:
    """(B, T, D) -> (B, H, T, d) by taking each head's feature block."""
    d = x.shape[-1] // H
    return torch.stack([x[..., h * d : (h + 1) * d] for h in range(H)], dim=1)


def _expect_split(fn, x: torch.Tensor, H: int) -> None:
    got = call(fn, x.clone(), H, name="split_heads")
    what = say("the heads' feature blocks")
    _judge_split(got, x, H, _by_blocks(x, H), name="split_heads(x, H)", what=what)


def _judge_split(got, x: torch.Tensor, H: int, want, *, name: str, what: str) -> None:
    """Judge ``got``, a split of ``x`` (B, T, D) into H heads, against ``want``
    (B, H, T, d): its layout first, then its numbers, naming each known mistake
    (no transpose, a (d, H) split, a head or token left 0, T and d swapped)."""
    B, T, D = x.shape
    d = D // H
    diagnose = {
        NO_TRANSPOSE: x.reshape(B, H, T, d),
        WRONG_AXIS: x.reshape(B, T, d, H).permute(0, 3, 1, 2),
    }
    _expect_split_shape(got, B=B, T=T, H=H, d=d, values=(want, diagnose, what))
    single, pairs = _with_one_short(diagnose, want, {1: 1, 2: 1})  # a head, a token
    expect_close(got, want, name, diagnose=[_with_d_t(single, want), pairs], what=what)


def _with_d_t(diagnose: dict, want: torch.Tensor) -> dict:
    """``diagnose`` and each of its mistakes laid out (B, H, d, T) as well: where
    T == d, such a split has the right shape and only its values tell."""
    B, H, T, d = want.shape
    if T != d:
        return diagnose
    swapped = {HEADS_D_T: want.mT}
    swapped |= {
        both(HEADS_D_T, m): tuple(v.mT for v in w) if isinstance(w, tuple) else w.mT
        for m, w in diagnose.items()
    }
    return {**diagnose, **swapped}


def _expect_not_d_t(got, *, B: int, T: int, H: int, d: int, values=None) -> None:
    """Name a split laid out (B, H, d, T) (T and d swapped, e.g. by transpose(1,
    3)). With ``values`` = ``(want, diagnose, what)``, go on judging it with T and
    d swapped back, so that a second mistake (a (d, H) split) is named too."""
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != (B, H, d, T):
        return
    if d == T:  # the right shape: the values tell (_with_d_t)
        return
    _expect_relaid(got.mT, (B, H, d, T), HEADS_D_T, SWAPPED_BACK_OFF, values)


def _expect_not_merged(got, *, B: int, T: int, H: int, d: int, values=None) -> None:
    """Name a split laid out (B*H, T, d), batch and heads merged (d2l's
    transpose_qkv). With ``values``, go on judging it as (B, H, T, d), so that a
    second mistake (no transpose, a (d, H) split) is named too."""
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != (B * H, T, d):
        return
    back = got.reshape(B, H, T, d)
    _expect_relaid(back, (B * H, T, d), BATCH_HEADS_MERGED, MERGED_APART_OFF, values)


def _expect_relaid(back, shape, why: str, off: str, values) -> None:
    """Fail naming the layout ``why`` of a split of shape ``shape``; with
    ``values`` = ``(want, diagnose, what)``, also whatever mistake its numbers
    ``back``, laid out (B, H, T, d) again, show (``off``: how far they are)."""
    name = "split_heads(x, H)"
    layout = say("{name} has shape {got}; {why}", name=name, got=shape, why=why)
    if values is None:
        fail(layout)
    want, diagnose, what = values
    fail_laid_out(layout, back, want, diagnose, off=off, name=name, what=what)


def _expect_split_shape(got, *, B: int, T: int, H: int, d: int, values=None) -> None:
    if isinstance(got, torch.Tensor) and tuple(got.shape) == (B, T, H, d) and T != H:
        fail(
            "split_heads returned (B, T, H, d): also move the head dim "
            "before T, giving (B, H, T, d).",
            mistake="no-swap",
        )
    if isinstance(got, torch.Tensor) and tuple(got.shape) == (B, T, d, H) and d != H:
        fail(
            "split_heads returned (B, T, d, H): after view(B, T, H, d), swap T and "
            "H (transpose(1, 2)), not the last two dims.",
            mistake="last-two-swapped",
        )
    _expect_not_d_t(got, B=B, T=T, H=H, d=d, values=values)
    _expect_not_merged(got, B=B, T=T, H=H, d=d, values=values)
    expect_shape(
        got,
        (B, H, T, d),
        "split_heads(x, H)",
        say("Heads become a dimension: (B, H, T, d)."),
    )


def _expect_merge(fn, heads: torch.Tensor) -> None:
    B, H, T, d = heads.shape
    want = torch.cat([heads[:, h] for h in range(H)], dim=-1)
    got = call(fn, heads.clone(), name="merge_heads")
    if isinstance(got, torch.Tensor) and got.shape == heads.shape:
        fail(
            "merge_heads returned its input's shape; it should give (B, T, H*d).",
            mistake="not-merged",
        )
    expect_shape(got, (B, T, H * d), "merge_heads(x)")
    what = say("the heads laid side by side")
    _judge_merge(got, heads, want, name="merge_heads(x)", what=what)


def _judge_merge(got, heads: torch.Tensor, want, *, name: str, what: str) -> None:
    """Judge ``got``, ``heads`` (B, H, T, d) merged, against ``want`` (B, T, D),
    naming each known mistake (no transpose, a (d, H) layout, a token or head
    left 0)."""
    B, H, T, d = heads.shape
    diagnose = {
        MERGE_ORDER: heads.reshape(B, T, H * d),
        MERGE_D_H: heads.permute(0, 2, 3, 1).reshape(B, T, H * d),
    }
    expect_close(
        got,
        want,
        name,
        diagnose=_with_one_short(diagnose, want, {1: 1, 2: d}),  # a token, a head
        what=what,
    )


def _sample_queries(text: str = data.SAMPLE_TEXT):
    """Layer 0's query output for ``text`` (1, T, D) and bertviz's (1, H, T, d)."""
    model, tok = models.oracle_model(), models.load_tokenizer()
    with torch.no_grad():
        hidden = model(**tok(text, return_tensors="pt")).hidden_states[0]
        q = model.encoder.layer[0].attention.self.query(hidden)
    return q, sample_qk(0, text)[0], model.config.num_attention_heads


def split_heads_shape(fn) -> None:
    """split_heads gives (B, H, T, d) for the course model's queries."""
    for text in SAMPLE_TEXTS:
        q, nv, H = _sample_queries(text)
        B, T, D = q.shape
        got = call(fn, q, H, name="split_heads")
        _expect_split_shape(got, B=B, T=T, H=H, d=D // H)


def split_heads_bertviz(fn) -> None:
    """split_heads of layer 0's queries equals bertviz's neuron-view queries."""
    for text in SAMPLE_TEXTS:
        q, nv, H = _sample_queries(text)
        got = call(fn, q, H, name="split_heads")
        what = say("bertviz's neuron-view queries")
        _judge_split(got, q, H, nv, name="split_heads(q, H)", what=what)


def _random_shapes(seed: int, n: int = 5):
    """``(generator, B, T, H, d)`` for n random cases, reproducible per seed."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(n):  # T, H and d all differ, so every mistake looks different
        H, d = rng.choice([2, 3, 4, 6]), rng.choice([5, 8])
        T = rng.choice([t for t in range(2, 10) if t not in (H, d)])
        yield gen, rng.randint(1, 3), T, H, d


def split_heads_random(fn, seed: int) -> None:
    """Other batch sizes, lengths, head counts and sizes."""
    verdicts = CaseVerdicts()
    for gen, B, T, H, d in _random_shapes(seed):
        with verdicts:
            _expect_split(fn, torch.randn(B, T, H * d, generator=gen), H)
    verdicts.fail_if_any()


def merge_heads_shape(fn) -> None:
    """merge_heads gives (B, T, D) for bertviz's queries."""
    for text in SAMPLE_TEXTS:
        _, nv, _ = _sample_queries(text)
        B, H, T, d = nv.shape
        # .contiguous(): laid out as (B, H, T, d), like the output of probs @ V.
        got = call(fn, nv.contiguous(), name="merge_heads")
        expect_shape(got, (B, T, H * d), "merge_heads(queries)")


def merge_heads_values(fn) -> None:
    """merge_heads of bertviz's queries gives back the query layer's output."""
    for text in SAMPLE_TEXTS:
        q, nv, _ = _sample_queries(text)
        got = call(fn, nv.contiguous(), name="merge_heads")
        what = say("the query layer's output")
        _judge_merge(got, nv, q, name="merge_heads(queries)", what=what)


def merge_heads_random(fn, seed: int) -> None:
    """Other shapes; inputs laid out as (B, H, T, d) in memory, like probs @ V."""
    verdicts = CaseVerdicts()
    for gen, B, T, H, d in _random_shapes(seed):
        with verdicts:
            _expect_merge(fn, torch.randn(B, H, T, d, generator=gen))
    verdicts.fail_if_any()
