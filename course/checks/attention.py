"""Checks for 06_manual_attention: one head, the mask, all heads.

Oracles: the model's own ``attentions`` and the self-attention module's own output
(captured with a forward hook while the model runs), both computed before the
student's code runs with that module's ``forward`` turned off.
"""

from __future__ import annotations

import math
import random

import torch

from ..hints import hint as hint  # the notebook's check.hint("<exercise>")
from ..i18n import N_, say
from ..worked import worked as worked  # check.worked("<exercise>"), once tried
from . import (
    SAMPLE_TEXTS,
    allclose,
    call,
    expect_close,
    expect_shape,
    fail,
    given,
)
from . import attention_steps as steps_
from .calls import CaseVerdicts
from .compare import is_close
from .lessons import FUSED_ATTENTION, Lesson
from .mistaken import Step, mistaken
from .oracles import (
    BY_D,
    BY_HAND,
    BY_WIDTH,
    NO_SCALE,
    OVER_QUERIES,
    PADDING_INVERTED,
    PROBS_T,
    QUERY_AXIS,
    SPLIT_NO_TRANSPOSE,
    Case,
    course_case,
    random_cases,
)

_softmax = torch.softmax
LESSONS = {  # head_attention(hidden, self_attn, ...), multi_head_attention likewise
    name: Lesson(BY_HAND, FUSED_ATTENTION, whole=("1",))
    for name in ("head_attention", "multi_head_attention")
}
NO_MASK = N_(
    "padded keys get weight: the attention mask was not applied (or it was laid "
    "along the queries, (B, 1, T, 1), where adding to a whole row changes no "
    "softmax: it goes along the keys, (B, 1, 1, T)).",
    mistake="padding-not-masked",
)
SIGN = N_(
    "the mask has the wrong sign: padded keys must get a large negative "
    "score, (1 - mask) * -10000 (or the dtype's min), so that exp() sends "
    "them to 0."
)
MULTIPLIED = N_(
    "the mask was multiplied into the scores; a score of 0 still gets "
    "weight. Add a large negative number at the padded keys instead.",
    mistake="mask-multiplied",
)
ON_K = N_(
    "the context weighs K, not V (probs @ K, or V made with the key projection): "
    "context = probs @ V, where V is the value projection of hidden.",
    mistake="probs-k",
)
AS_IS = N_(
    "the (B, T) mask was not broadcast over heads and queries: added as it "
    "is, it lines up with the scores' last dims (query, key) instead of "
    "(batch, key). Make it (B, 1, 1, T) first.",
    mistake="not-broadcast",
)
UNMASKED = N_(
    "context was computed from the probabilities before the mask was applied: "
    "multiply V by the masked probs, the ones you return.",
    mistake="context-unmasked",
)
FOUR_D_MASK = N_(
    "probs is (B, B, T, T): a (B, 1, 1, T) mask met one head's (B, T, T) scores "
    "and broadcast them over the batch twice. One head's scores take the mask as "
    "(B, 1, T).",
    mistake="mask-4d-on-one-head",
)
AFTER_SOFTMAX = N_(
    "the mask was applied after the softmax, by zeroing the padded keys' weights: "
    "the rows of padded examples then sum to less than 1. Add the large negative "
    "number to the scores before the softmax.",
    mistake="mask-after-softmax",
)
SELF_SCORES = N_(
    "the scores compare the queries with themselves, or the keys with themselves: "
    "Q and K were made with the same projection. Q comes from self_attn.query and K "
    "from self_attn.key.",
    mistake="one-projection-twice",
)
MIXED = N_(
    "view without transpose mixes heads: transpose the context back to (B, "
    "T, H, d) before merging to (B, T, D).",
    mistake="merge-view-no-transpose",
)


NO_Q_BIAS = N_(
    "the queries have no bias: Q = hidden @ W_q.T + b_q (self_attn.query(hidden) "
    "adds it).",
    mistake="query-bias-missing",
)
NO_K_BIAS = N_(
    "the keys have no bias: K = hidden @ W_k.T + b_k (self_attn.key(hidden) adds it).",
    mistake="key-bias-missing",
)
NO_V_BIAS = N_(
    "the values have no bias: V = hidden @ W_v.T + b_v (self_attn.value(hidden) "
    "adds it).",
    mistake="value-bias-missing",
)
NO_BIASES = N_(
    "Q, K and V have no biases: each projection is hidden @ W.T + b (calling the "
    "linear, e.g. self_attn.query(hidden), adds it).",
    mistake="biases-missing",
)
V_KEY_BIAS = N_(
    "the values have the key's bias: V = hidden @ W_v.T + b_k. Each projection "
    "adds its own: V = hidden @ W_v.T + b_v, the bias of self_attn.value.",
    mistake="value-bias-of-key",
)
V_QUERY_BIAS = N_(
    "the values have the query's bias: V = hidden @ W_v.T + b_q. Each projection "
    "adds its own: V = hidden @ W_v.T + b_v, the bias of self_attn.value.",
    mistake="value-bias-of-query",
)
HEAD_START_BY_COUNT = N_(
    "the head's rows start at head * num_attention_heads: head h owns rows h * d "
    "to (h + 1) * d of each projection, d the head size (attention_head_size).",
    mistake="head-start-by-count",
)
QK_SWAPPED = N_(
    "the queries were made with the key projection and the keys with the query "
    "one: the scores come out transposed, K Q^T, each key's row over the queries. "
    "Q comes from self_attn.query and K from self_attn.key.",
    mistake="query-key-swapped",
)
VALUE_START = N_(
    "a head's values were taken from V's features h:h+d: head h owns features "
    "h * d to (h + 1) * d of V (d the head size, attention_head_size), as it "
    "does of Q and K.",
    mistake="value-start",
)
OVER_HEADS = N_(
    "the softmax runs over the heads (dim 1 of (B, H, T, T)): each query's weights "
    "must sum to 1 over the keys, the last dim.",
    mistake="softmax-over-heads",
)


def _start(case: Case, head: int | None) -> dict:
    """Q, K, V of ``head`` (B, T, d), or of every head (B, H, T, d), their biases,
    and the padding (1 at padded keys) laid along the keys."""
    q, k, v = case.qkv(head)
    biases = {  # (H, 1, d): broadcast over the batch and the tokens
        name: lin.bias.detach().view(case.H, 1, case.d)
        for name, lin in (
            ("bq", case.self_attn.query),
            ("bk", case.self_attn.key),
            ("bv", case.self_attn.value),
        )
    }
    if head is not None:
        biases = {name: b[head] for name, b in biases.items()}  # (1, d)
    pad = (1.0 - case.mask.to(q.dtype))[:, None, :]  # (B, 1, T)
    if head is None:
        pad = pad[:, None]  # (B, 1, 1, T)
    keep = pad == 0  # True where a key may be attended
    return {"q": q, "k": k, "v": v, **biases, "pad": pad, "keep": keep}


def _with(state: dict, **values) -> dict:
    return {**state, **values}


def _steps(case: Case, head: int | None, *, context: bool) -> list[Step]:
    """One head's attention (or every head's), step by step, with the ways each
    step goes wrong; with ``context``, on to the context (merged, for every head)."""
    d, D = case.d, case.hidden.shape[-1]
    B, T = case.mask.shape
    padded = bool((case.mask == 0).any())

    def masked(fill):  # a mistake only where a key is padded
        return (lambda st: _with(st, s=fill(st))) if padded else (lambda st: None)

    def projected(shape):  # the three linears' outputs, each shaped by ``shape``
        with torch.no_grad():
            return {
                name: shape(lin(case.hidden))
                for name, lin in (
                    ("q", case.self_attn.query),
                    ("k", case.self_attn.key),
                    ("v", case.self_attn.value),
                )
            }

    def start_by_count(st):  # head h's rows from h * H, not h * d
        if head is None or head * case.H in (0, head * d) or head * case.H + d > D:
            return None
        lo = head * case.H
        return _with(st, **projected(lambda t: t[..., lo : lo + d]))  # (B, T, d)

    def value_from_h(st):  # head h's values from V's features h:h+d, not h*d
        heads = range(case.H) if head is None else (head,)
        if d == 1 or max(heads) == 0:  # there [h:h+d] is [h*d:(h+1)*d]
            return None
        V = projected(lambda t: t)["v"]  # (B, T, D)
        v = torch.stack([V[..., h : h + d] for h in heads], dim=1)  # (B, H, T, d)
        return _with(st, v=v if head is None else v[:, 0])

    def split_by_view(st):  # (B, T, D) viewed straight as (B, H, T, d)
        if head is not None or 1 in (case.H, T):
            return None
        return _with(st, **projected(lambda t: t.view(B, case.H, T, d)))

    project = Step(
        right=lambda st: st,
        wrong={
            HEAD_START_BY_COUNT: start_by_count,
            SPLIT_NO_TRANSPOSE: split_by_view,
            NO_Q_BIAS: lambda st: _with(st, q=st["q"] - st["bq"]),
            NO_K_BIAS: lambda st: _with(st, k=st["k"] - st["bk"]),
            NO_BIASES: lambda st: _with(
                st, q=st["q"] - st["bq"], k=st["k"] - st["bk"], v=st["v"] - st["bv"]
            ),
            SELF_SCORES: (
                lambda st: _with(st, k=st["q"]),
                lambda st: _with(st, q=st["k"]),
            ),
            QK_SWAPPED: lambda st: None if T == 1 else _with(st, q=st["k"], k=st["q"]),
        }
        | (
            {
                NO_V_BIAS: lambda st: _with(st, v=st["v"] - st["bv"]),
                VALUE_START: value_from_h,
                # V's own weight with another projection's bias
                V_KEY_BIAS: lambda st: _with(st, v=st["v"] - st["bv"] + st["bk"]),
                V_QUERY_BIAS: lambda st: _with(st, v=st["v"] - st["bv"] + st["bq"]),
            }
            if context
            else {}
        ),
    )
    scales = {NO_SCALE: 1.0, BY_D: d}
    if D != d:  # with one head sqrt(D) is the right scale
        scales[BY_WIDTH] = math.sqrt(D)
    on_queries = (case.mask == 0)[:, :, None]  # (B, T, 1): padded queries
    if head is None:
        on_queries = on_queries[:, None]  # (B, 1, T, 1)
    tokens = lambda st: (1 - st["pad"]).bool().expand_as(st["scaled"])  # noqa: E731
    mask2d = lambda st: case.mask.to(st["scaled"].dtype)  # noqa: E731  (B, T)
    mask = Step(
        right=lambda st: _with(st, s=st["scaled"] + st["pad"] * -1e4),
        wrong={
            SIGN: masked(lambda st: st["scaled"] + st["pad"] * 1e4),
            MULTIPLIED: masked(lambda st: st["scaled"] * (1 - st["pad"])),
            AFTER_SOFTMAX: (lambda st: _with(st, s=st["scaled"], after=1 - st["pad"]))
            if padded
            else (lambda st: None),
            PADDING_INVERTED: (  # added where the tokens are, or filled there
                masked(lambda st: st["scaled"] + (1 - st["pad"]) * -1e4),
                masked(
                    lambda st: st["scaled"].masked_fill(
                        tokens(st), torch.finfo(st["scaled"].dtype).min
                    )
                ),
                masked(  # NaN rows where nothing is padded
                    lambda st: st["scaled"].masked_fill(tokens(st), -math.inf)
                ),
            ),
        }
        | ({} if context else {NO_MASK: masked(lambda st: st["scaled"])})
        | (  # the padding laid along the queries, (B, 1, T, 1) or one head's
            # (B, T, 1); added at -10000 it changes no softmax: the numbers of no
            # mask (NO_MASK for probs; the weigh step's unmasked way for context)
            {QUERY_AXIS: steps_.along_queries(on_queries)} if padded and T > 1 else {}
        )
        | (  # only then does a (B, T) mask broadcast, wrongly, without an error
            {AS_IS: lambda st: _with(st, s=st["scaled"] + (1.0 - mask2d(st)) * -1e4)}
            if B == T
            else {}
        ),
    )
    over = {OVER_QUERIES: -2}
    if head is None and case.H > 1:
        over[OVER_HEADS] = 1
    steps = [project, steps_.scale(d, scales), mask, steps_.softmax(over)]
    if not context:
        return steps
    steps.append(
        steps_.weigh(on_keys=ON_K, probs_transposed=PROBS_T, unmasked=UNMASKED)
    )
    if head is None:  # (B, H, T, d) -> (B, T, D)
        steps.append(steps_.merge(MIXED))
    return steps


def wrong_probs(case: Case, head: int | None = None) -> list[dict]:
    """What the probs of one head (or of every head) would be with one, then two,
    of the known mistakes: tiers for ``expect_close``'s ``diagnose``."""
    steps = _steps(case, head, context=False)
    return mistaken(_start(case, head), steps, result=lambda st: st["p"])


def wrong_contexts(case: Case, head: int | None = None) -> list[dict]:
    """What the context would be with one, then two, of the known mistakes (a
    probs mistake carried into it included): (B, T, d) for one ``head``, else
    merged, (B, T, D)."""
    steps = _steps(case, head, context=True)
    return mistaken(_start(case, head), steps, result=lambda st: st["c"])


def _pair(got, name: str):
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        fail("{name} should return a pair (probs, context).", name=name)
    return got


def _expect_head(fn, case: Case, *, head: int, masked: bool, part: str) -> None:
    args = (head, case.mask) if masked else (head,)
    probs, context = _pair(
        case.run(fn, *args, name="head_attention", lesson=LESSONS["head_attention"]),
        "head_attention",
    )
    B, T, _ = case.hidden.shape
    if part in ("shape", "all"):
        if masked and getattr(probs, "shape", None) == (B, B, T, T):
            fail(FOUR_D_MASK)
        expect_shape(probs, (B, T, T), "probs", say("One head: (B, T, T)."))
        expect_shape(context, (B, T, case.d), "context", say("One head: (B, T, d)."))
    if part in ("probs", "all"):
        expect_close(
            probs,
            case.probs[:, head],
            say("probs of head {head}", head=head),
            diagnose=lambda: wrong_probs(case, head),
            what=say("the model's attentions"),
        )
    if part in ("context", "all"):
        want = case.context[..., head * case.d : (head + 1) * case.d]
        expect_close(
            context,
            want,
            say("context of head {head}", head=head),
            diagnose=lambda: wrong_contexts(case, head),
            what=say("the attention module's output"),
        )


def head_attention_shapes(fn) -> None:
    """head_attention returns probs (B, T, T) and context (B, T, d)."""
    for text in SAMPLE_TEXTS:
        _expect_head(fn, course_case(text=text), head=0, masked=False, part="shape")


def head_attention_probs(fn) -> None:
    """Heads 0 and 7 of layer 0: probs equal the model's attentions."""
    for text in SAMPLE_TEXTS:
        for head in (0, 7):
            _expect_head(
                fn, course_case(text=text), head=head, masked=False, part="probs"
            )


def head_attention_context(fn) -> None:
    """Heads 0 and 7 of layer 0: context equals the attention module's output."""
    for text in SAMPLE_TEXTS:
        for head in (0, 7):
            _expect_head(
                fn, course_case(text=text), head=head, masked=False, part="context"
            )


def head_attention_mask(fn) -> None:
    """A padded batch of two texts: padded keys get zero weight."""
    _expect_head(fn, course_case(padded=True), head=3, masked=True, part="all")


def head_attention_random(fn, seed: int) -> None:
    """Other models, layers, heads, batches, lengths and padding; the last also
    without a mask (attention_mask=None, the default)."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    for i, case in enumerate(random_cases(seed, sharpen=True)):  # a wrong scale shows
        # the first (with several heads) takes head 1: head 0's rows start at 0
        # however a head's start is counted
        head = 1 if i == 0 and case.H > 1 else rng.randrange(case.H)
        with verdicts:
            _expect_head(fn, case, head=head, masked=True, part="all")
    with verdicts:
        _expect_head(fn, _unpadded(case), head=head, masked=False, part="all")
    verdicts.fail_if_any()


def _unpadded(case: Case) -> Case:
    """``case``'s model and tokens with no padding: what no mask means."""
    return Case(case.model, case.layer, case.ids, torch.ones_like(case.mask))


def _ext(fn, mask, dtype):
    """Call extended_mask; fail unless the result is (B, 1, 1, T)."""
    got = call(fn, mask.clone(), dtype, name="extended_mask")
    B, T = mask.shape
    if isinstance(got, torch.Tensor) and tuple(got.shape) == (B, T):
        fail(
            "extended_mask returned (B, T): the mask is not broadcast "
            "over heads and queries; make it (B, 1, 1, T).",
            mistake="mask-2d",
        )
    if isinstance(got, torch.Tensor) and tuple(got.shape) == (B, 1, T, 1) and T > 1:
        fail(
            "extended_mask returned (B, 1, T, 1): the padding runs along the "
            "queries; it must run along the keys, the last dim: (B, 1, 1, T).",
            mistake="mask-query-axis",
        )
    hint = say("It is added to scores of shape (B, H, T, T).")
    return expect_shape(got, (B, 1, 1, T), "extended_mask", hint)


def _expect_ext(fn, mask, dtype) -> None:
    got = _ext(fn, mask, dtype)
    if got.dtype != dtype:
        fail(
            "extended_mask has dtype {got}; it should have the dtype "
            "asked for ({asked}), the scores' dtype.",
            got=got.dtype,
            asked=dtype,
        )
    flat, keep = got[:, 0, 0], mask.bool()
    if bool(flat[keep].isnan().any()):
        fail(
            "extended_mask is NaN at real tokens: 0 times an infinite number. A "
            "dtype's min (torch.finfo(torch.float64).min) is -inf once stored in "
            "float32: build the mask in the dtype asked for, or pick the values "
            "with torch.where instead of multiplying.",
            mistake="nan-at-tokens",
        )
    if bool((flat[~keep] > 0).any()):
        fail(
            "extended_mask is positive at padding: {why}", mistake="positive", why=SIGN
        )
    if bool((flat[keep] != 0).any()):
        fail(
            "extended_mask is not 0 at real tokens: tokens keep their "
            "scores, only padding gets a large negative number (the mask "
            "is the wrong way round?).",
            mistake="nonzero",
        )
    if bool((flat[~keep] > -1e4).any()):
        fail(
            "extended_mask at padding should be a large negative number "
            "(-10000 or less, e.g. torch.finfo(dtype).min)."
        )


def extended_mask_shape(fn) -> None:
    """extended_mask of a (2, T) mask has shape (2, 1, 1, T)."""
    _ext(fn, course_case(padded=True).mask, torch.float32)


def extended_mask_values(fn) -> None:
    """0 at tokens, a large negative number at padding, in the dtype asked for."""
    _expect_ext(fn, course_case(padded=True).mask, torch.float32)


def extended_mask_random(fn, seed: int) -> None:
    """Random masks and dtypes, each with a token and a padding position."""
    verdicts = CaseVerdicts()
    gen = torch.Generator().manual_seed(seed)
    for dtype in (torch.float32, torch.float64, torch.float32):
        with verdicts:
            B, T = torch.randint(1, 5, (2,), generator=gen).tolist()
            mask = (torch.rand(B, T + 1, generator=gen) > 0.4).long()
            mask[:, 0] = 1
            pad = torch.randint(1, T + 1, (1,), generator=gen)
            mask[torch.randint(0, B, (1,), generator=gen), pad] = 0
            _expect_ext(fn, mask, dtype)
    verdicts.fail_if_any()


def _expect_mha(fn, case: Case, masked: bool, part: str) -> None:
    args = (case.mask,) if masked else ()
    probs, context = _pair(
        case.run(
            fn,
            *args,
            name="multi_head_attention",
            lesson=LESSONS["multi_head_attention"],
        ),
        "multi_head_attention",
    )
    B, T, D = case.hidden.shape
    expect_shape(probs, case.probs.shape, "probs", "(B, H, T, T).")
    expect_shape(
        context, (B, T, D), "context", say("(B, T, D): the heads merged back.")
    )
    verdicts = CaseVerdicts()  # a wrong probs and a wrong merge: both named
    if part in ("probs", "all"):
        with verdicts:
            expect_close(
                probs,
                case.probs,
                "probs",
                diagnose=lambda: wrong_probs(case),
                what=say("the model's attentions"),
            )
    if part in ("context", "all"):
        with verdicts:
            _expect_context(context, probs, case, probs_judged=part == "all")
    verdicts.fail_if_any()


def _expect_context(context, probs, case: Case, *, probs_judged: bool) -> None:
    """context equals the module's output; a merge mistake is named from the
    model's probs and from the student's own (a wrong probs does not hide it).
    With ``probs_judged`` (the probs have their own verdict), a context right for
    the student's own wrong probs gets none."""
    B, T, D = case.hidden.shape
    _, k, v = case.qkv()
    own = probs.to(v.dtype)  # (B, H, T, T)
    if (
        probs_judged
        and not is_close(own, case.probs)
        and is_close(context, (own @ v).transpose(1, 2).reshape(B, T, D))
    ):
        return  # right for the student's own probs: their verdict says what is wrong

    def diagnose() -> list[dict]:
        """A merge mistake made on the model's probs, or on the student's own."""
        tiers = wrong_contexts(case)
        tiers[0] = tiers[0] | {
            MIXED: tiers[0].get(MIXED, ()) + ((own @ v).reshape(B, T, D),),
            ON_K: tiers[0].get(ON_K, ())
            + ((own @ k).transpose(1, 2).reshape(B, T, D),),
        }
        return tiers

    expect_close(
        context,
        case.context,
        "context",
        diagnose=diagnose,
        what=say("the attention module's output"),
    )


def multi_head_attention_probs(fn) -> None:
    """All heads of layer 0: probs equal the model's attentions."""
    for text in SAMPLE_TEXTS:
        _expect_mha(fn, course_case(text=text), False, "probs")


def multi_head_attention_context(fn) -> None:
    """All heads of layer 0: context equals the attention module's output."""
    for text in SAMPLE_TEXTS:
        _expect_mha(fn, course_case(text=text), False, "context")


def multi_head_attention_mask(fn) -> None:
    """A padded batch: probs and context equal the model's."""
    _expect_mha(fn, course_case(padded=True), True, "all")


def multi_head_attention_random(fn, seed: int) -> None:
    """Other models, layers, batches, lengths and padding; the last also without
    a mask (attention_mask=None, the default)."""
    verdicts = CaseVerdicts()
    for case in random_cases(seed, sharpen=True):  # a wrong scale shows
        with verdicts:
            _expect_mha(fn, case, True, "all")
    with verdicts:
        _expect_mha(fn, _unpadded(case), False, "all")
    verdicts.fail_if_any()


def first_head_attention_values(attention) -> None:
    """attention_first_head_first_layer equals the model's attentions[0][0, 0]."""
    got = given(attention, "attention_first_head_first_layer")
    case = course_case()
    expect_close(
        got,
        case.probs[0, 0],
        "attention_first_head_first_layer",
        diagnose=[
            {
                say(
                    "it is transposed: row i is query i's weights over the keys.",
                    mistake="weights-transposed",
                ): case.probs[0, 0].T
            },
            *wrong_probs(case, 0),
        ],
        what=say("the model's attentions[0][0, 0]"),
    )


def first_head_attention_rows(attention) -> None:
    """attention_first_head_first_layer is (T, T) and each row sums to 1."""
    got = given(attention, "attention_first_head_first_layer")
    T = course_case().probs.shape[-1]
    expect_shape(got, (T, T), "attention_first_head_first_layer")
    if not allclose(
        got.sum(-1).double(), torch.ones(T, dtype=torch.float64), atol=1e-4
    ):
        fail(
            "The rows of attention_first_head_first_layer do not sum to "
            "1 — softmax over the key dim (-1)."
        )
