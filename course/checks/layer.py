"""Checks for 07_full_layer: embeddings, attention block, feed-forward, layer, encoder.

Oracles: the model's ``hidden_states`` and each submodule's own output, computed
before the student's code runs with those modules' ``forward`` turned off (the
:class:`Case` below the checks: made once per input and process, with the
misconceptions they name and a call made twice to catch active dropout).
"""

from __future__ import annotations

import functools
import random

import torch
import torch.nn.functional as F

from .. import data, models
from ..hints import hint as hint  # the notebook's check.hint("<exercise>")
from ..i18n import N_, say
from ..worked import worked as worked  # check.worked("<exercise>"), once tried
from . import (
    CheckFailed,
    call,
    equal,
    expect_close,
    expect_shape,
    fail,
    random_batch,
    random_tiny_bert,
)
from .calls import CaseVerdicts, both, call_naming
from .lessons import FUSED_ATTENTION, Lesson
from .mistaken import Step, mistaken
from .oracles import (
    BY_WIDTH,
    NO_SCALE,
    PADDING_INVERTED,
    QUERY_AXIS,
    Case,
    own_copy,
    sharpen_attention,
)


def _expect_embeddings(fn, case: Case) -> None:
    emb = case.model.embeddings
    args = (case.ids, case.types, emb)
    with LESSONS["embeddings_forward"].enforced(args):
        got = _whole_table_named(fn, args, emb.position_embeddings.num_embeddings)
    want = case.states[0]
    expect_shape(got, want.shape, "embeddings_forward(...)", "(B, T, D).")

    def diagnose() -> dict:  # only for a wrong answer: an offset per table row
        with torch.no_grad():
            return _wrong_embeddings(case, got)

    expect_close(
        got,
        want,
        "embeddings_forward(...)",
        diagnose=diagnose,
        what=say("the model's hidden_states[0]"),
    )


WHOLE_TABLE = N_(
    "embeddings_forward added the whole position table, all {rows} rows of it, "
    "to {T} tokens: the positions are 0 to T - 1, "
    "position_embeddings(torch.arange(T)), the first T rows. {verdict}",
    mistake="whole-position-table",
)


def _whole_table_named(fn, args, rows: int):
    """The student's embeddings; where a sum fails on a size that is the position
    table's length, the verdict says the whole table was added."""
    try:
        return twice(fn, args, "embeddings_forward")
    except CheckFailed as err:
        T = args[0].shape[1]
        if (
            f"({rows})" in str(err)
            and "must match the size of tensor b" in str(err)
            and rows != T
        ):
            fail(WHOLE_TABLE, verdict=str(err), rows=rows, T=T)
        raise


def _wrong_embeddings(case: Case, got: torch.Tensor | None = None) -> dict:
    """What each embeddings misconception gives: a wrong sum (a table left out,
    type 0 for every token, positions from an offset k >= 1, the one that comes
    nearest ``got``, the answer, where one is given) and a wrong norm (none, a new
    one), alone and one of each together (both are named)."""
    emb, T = case.model.embeddings, case.ids.shape[1]
    w, p, t = (
        emb.word_embeddings(case.ids),
        emb.position_embeddings.weight[:T],
        emb.token_type_embeddings(case.types),
    )
    sums = {NO_POSITIONS: w + t, NO_TYPES: w + p}
    if bool(case.types.any()):  # type 0 everywhere differs only where types differ
        sums[TYPE_ZERO] = w + p + emb.token_type_embeddings.weight[0]
    norms = {NO_NORM: lambda x: (x,), FRESH_LN: _fresh_norm}
    if emb.LayerNorm.eps != _TORCH_EPS:
        norms[DEFAULT_EPS] = lambda x: (_default_eps(emb.LayerNorm, x),)
    for k in _offsets(emb, w + t, got, norms.values()):
        sums[say(POSITIONS_FROM, k=k)] = (
            w + emb.position_embeddings.weight[k : k + T] + t
        )
    diagnose = {mistake: emb.LayerNorm(x) for mistake, x in sums.items()}
    diagnose |= {mistake: norm(w + p + t) for mistake, norm in norms.items()}
    diagnose[NORM_FIRST] = (emb.LayerNorm(w) + p + t, emb.LayerNorm(w + p) + t)
    for in_sum, x in sums.items():
        for in_norm, norm in norms.items():
            diagnose[both(in_sum, in_norm)] = norm(x)
    return diagnose


def _offsets(emb, rest: torch.Tensor, got, norms) -> list[int]:
    """The offsets k >= 1 (positions k to k + T - 1: from 1, RoBERTa's padding_idx
    + 1 = 2, ...) whose sum, ``rest`` (B, T, D) (the word and type embeddings) plus
    the position rows, comes nearest ``got``: normalised by the model's LayerNorm
    or by one of ``norms``. Found from the numbers, every offset the table has
    rows for at once; 1 alone where there is no answer to compare."""
    table, T = emb.position_embeddings.weight, rest.shape[-2]
    if table.shape[0] - T < 1:  # no row past T - 1
        return []
    if not isinstance(got, torch.Tensor) or got.shape != rest.shape:
        return [1]
    windows = table.unfold(0, T, 1)[1:].transpose(1, 2)  # (K, T, D): k = 1..K
    x = rest + windows[:, None]  # (K, B, T, D)
    found = set()
    for norm in (lambda v: (emb.LayerNorm(v),), *norms):
        for y in norm(x):
            far = (y - got.to(y.dtype)).abs().flatten(1).amax(1)  # (K,)
            found.add(int(far.nan_to_num(torch.inf).argmin()) + 1)
    return sorted(found)


def embeddings_forward_shape(fn) -> None:
    """embeddings_forward gives (B, T, D)."""
    case = course_case()
    emb = case.model.embeddings
    args = (case.ids, case.types, emb)
    with LESSONS["embeddings_forward"].enforced(args):
        got = call(fn, *args, name="embeddings_forward")
    expect_shape(got, case.states[0].shape, "embeddings_forward(...)", "(B, T, D).")


def embeddings_forward_values(fn) -> None:
    """embeddings_forward equals hidden_states[0] on a sentence pair (token types 0 and 1)."""
    for texts in UNPADDED:
        _expect_embeddings(fn, course_case(texts=texts))


def embeddings_forward_random(fn, seed: int) -> None:
    """Other model sizes, batches and token types."""
    verdicts = CaseVerdicts()
    for case in random_cases(seed):
        with verdicts:
            _expect_embeddings(fn, case)
    verdicts.fail_if_any()


def _expect_attention_block(fn, case: Case, masked: bool) -> None:
    att = case.block.attention
    args = (case.hidden.clone(), att) + ((case.mask,) if masked else ())
    with LESSONS["attention_block"].enforced(args):
        got = twice(fn, args, "attention_block")
    expect_close(
        got,
        case.attn_out,
        "attention_block(...)",
        diagnose=lambda: _wrong_attention_blocks(case, masked),
        what=say("the layer's attention output"),
    )


def _wrong_attention_blocks(case: Case, masked: bool) -> list[dict]:
    """What the attention block gives with one, then two, known mistakes: the
    self-attention's (its scale, its mask), the sublayer's scale, and where the
    residual and the norm go."""
    h, out = case.hidden, case.block.attention.output
    D = h.shape[-1]

    def attend(context_of):  # context_of(x): the self-attention's output of x
        return lambda st: {**st, "ctx": context_of}

    wrong_contexts = {
        NO_SCALE: attend(lambda x: _context(case, x, scale=1.0)),
        BY_WIDTH: attend(lambda x: _context(case, x, scale=1.0 / D)),
    }
    if masked and not bool(case.mask.all()):
        wrong_contexts[MASK_DROPPED] = attend(
            lambda x: case.context_of(x, masked=False)
        )
        wrong_contexts[PADDING_INVERTED] = tuple(
            attend(lambda x, i=i: _inverted_contexts(case, x)[i]) for i in range(2)
        )

    def sub(keep: float):
        return lambda st: {**st, "sub": out.dense(st["ctx"](h)) / keep}

    def arrange(how):
        return lambda st: {**st, "out": how(st)}

    steps = [
        Step(right=attend(case.context_of), wrong=wrong_contexts),
        Step(right=sub(1.0), wrong={SCALED: sub(_keep(case))}),
        Step(
            right=arrange(lambda st: out.LayerNorm(st["sub"] + h)),
            wrong={
                PRE_LN: arrange(lambda st: h + out.dense(st["ctx"](out.LayerNorm(h)))),
                AFTER_LN: arrange(lambda st: out.LayerNorm(st["sub"]) + h),
                NO_RESIDUAL: arrange(lambda st: out.LayerNorm(st["sub"])),
                FRESH_LN: tuple(  # at BERT's eps, or at torch's
                    arrange(lambda st, i=i: _fresh_norm(st["sub"] + h)[i])
                    for i in range(2)
                ),
            },
        ),
    ]
    with torch.no_grad():
        return mistaken({}, steps, result=lambda st: st["out"])


def _inverted_contexts(case: Case, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The self-attention's output of ``x`` with the mask the wrong way round: the
    large negative number added at the tokens (``mask * -10000``) or filled there."""
    keep = case.mask[:, None, None, :].float()  # (B, 1, 1, T): 1 at the tokens
    exts = (keep * -10000.0, keep * torch.finfo(torch.float32).min)
    outs = (case.self_attn(x, attention_mask=ext) for ext in exts)
    return tuple(o[0] if isinstance(o, tuple) else o for o in outs)


def _block_unmasked(case: Case) -> torch.Tensor:
    """The attention block's output with no mask reaching its self-attention."""
    h, out = case.hidden, case.block.attention.output
    return out.LayerNorm(out.dense(case.context_of(h, masked=False)) + h)


def _context(case: Case, x: torch.Tensor, *, scale: float) -> torch.Tensor:
    """The layer's self-attention of ``x`` (B, T, D) by hand, its scores scaled by
    ``scale ** 0.5`` instead of 1/sqrt(d): what a wrong scale gives."""
    sa, (B, T, _) = case.self_attn, x.shape
    q, k, v = (
        lin(x).view(B, T, case.H, case.d).transpose(1, 2)  # (B, H, T, d)
        for lin in (sa.query, sa.key, sa.value)
    )
    p = torch.softmax(q @ k.mT * scale**0.5 + case.ext, dim=-1)  # (B, H, T, T)
    return (p @ v).transpose(1, 2).reshape(B, T, case.H * case.d)


def attention_block_values(fn) -> None:
    """attention_block equals layer 2's attention output (course model, no padding)."""
    for texts in UNPADDED:
        _expect_attention_block(fn, course_case(texts=texts), masked=False)


def attention_block_mask(fn) -> None:
    """attention_block on a padded batch, with its mask."""
    _expect_attention_block(fn, course_case(padded=True), masked=True)


def attention_block_random(fn, seed: int) -> None:
    """Other models, layers, batches and padding; the first batch also without a
    mask (attention_mask=None, the default)."""
    verdicts = CaseVerdicts()
    cases = list(random_cases(seed))
    for case in cases:
        with verdicts:
            _expect_attention_block(fn, case, masked=True)
    with verdicts:
        _expect_attention_block(fn, _unpadded(cases[0]), masked=False)
    verdicts.fail_if_any()


def _unpadded(case: Case) -> Case:
    """``case``'s model, layer and tokens with no padding: what no mask means."""
    ones = torch.ones_like(case.mask)
    return Case(case.model, case.layer, case.ids, ones, types=case.types)


#: nn.LayerNorm's and F.layer_norm's eps where none is given.
_TORCH_EPS = 1e-5


def _default_eps(ln: torch.nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
    """``ln``'s weight and bias at torch's default eps, not ``ln.eps``."""
    return F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, eps=_TORCH_EPS)


def _fresh_norm(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """A new LayerNorm's output (weight 1, bias 0), with BERT's eps and with
    nn.LayerNorm's default."""
    return tuple(F.layer_norm(x, x.shape[-1:], eps=eps) for eps in (1e-12, _TORCH_EPS))


def _keep(case: Case) -> float:
    """1 - p: what dropout left on divides the sublayer's output by."""
    return 1.0 - case.model.config.hidden_dropout_prob


def _expect_feed_forward(fn, case: Case) -> None:
    layer, x = case.block, case.attn_out
    args = (x.clone(), layer)
    with LESSONS["feed_forward"].enforced(args):
        got = twice(fn, args, "feed_forward")
    with torch.no_grad():
        want = case.after
    expect_close(
        got,
        want,
        "feed_forward(...)",
        diagnose=lambda: _wrong_feed_forwards(case),
        what=say("the layer's output"),
        atol=2e-4,
    )


def _wrong_feed_forwards(case: Case) -> list[dict]:
    """What the feed-forward sublayer gives with one, then two, known mistakes:
    the activation, the sublayer's scale, and where the residual and the norm go."""
    layer, x = case.block, case.attn_out
    up, down, ln = (
        layer.intermediate.dense,
        layer.output.dense,
        layer.output.LayerNorm,
    )

    def act(fn):
        return lambda st: {**st, "act": fn}

    def sub(keep: float):
        return lambda st: {**st, "sub": down(st["act"](up(x))) / keep}

    def out(arrange):
        return lambda st: {**st, "out": arrange(st)}

    steps = [
        Step(
            right=act(F.gelu),
            wrong={
                RELU: act(F.relu),
                TANH_GELU: act(lambda v: F.gelu(v, approximate="tanh")),
            },
        ),
        Step(right=sub(1.0), wrong={SCALED: sub(_keep(case))}),
        Step(
            right=out(lambda st: ln(st["sub"] + x)),
            wrong={
                FF_RESIDUAL: out(lambda st: ln(st["sub"])),
                AFTER_LN: out(lambda st: ln(st["sub"]) + x),
                PRE_LN: out(lambda st: x + down(st["act"](up(ln(x))))),
                FRESH_LN: tuple(  # at BERT's eps, or at torch's
                    out(lambda st, i=i: _fresh_norm(st["sub"] + x)[i]) for i in range(2)
                ),
                OTHER_LN: out(
                    lambda st: layer.attention.output.LayerNorm(st["sub"] + x)
                ),
            },
        ),
    ]
    with torch.no_grad():
        return mistaken({}, steps, result=lambda st: st["out"])


def feed_forward_values(fn) -> None:
    """feed_forward equals layer 2's output given its attention output."""
    for texts in UNPADDED:
        _expect_feed_forward(fn, course_case(texts=texts))


def feed_forward_random(fn, seed: int) -> None:
    """Other models and layers."""
    verdicts = CaseVerdicts()
    for case in random_cases(seed):
        with verdicts:
            _expect_feed_forward(fn, case)
    verdicts.fail_if_any()


def _expect_layer(fn, case: Case, masked: bool) -> None:
    args = (case.hidden.clone(), case.block) + ((case.mask,) if masked else ())
    with LESSONS["bert_layer"].enforced(args):
        got = twice(fn, args, "bert_layer")
    expect_shape(got, case.after.shape, "bert_layer(...)", "(B, T, D).")
    expect_close(
        got,
        case.after,
        "bert_layer(...)",
        diagnose=lambda: _wrong_layers(case, masked),
        what=say("the model's next hidden state"),
        atol=2e-4,
    )


def _wrong_layers(case: Case, masked: bool) -> list[dict]:
    """What bert_layer gives with one, then two, known mistakes: in the attention
    block (the mask dropped, or laid along the queries) and in the feed-forward
    (its input, its residual, its activation, its LayerNorm); and the residual
    added after a LayerNorm, in either sublayer or both."""
    h, att, out = case.hidden, case.block.attention.output, case.block.output
    up = case.block.intermediate.dense

    def ff(inputs, act=F.gelu):
        return out.dense(act(up(inputs)))

    def attend(a):  # a: the attention block's output
        return lambda st: {**st, "a": a}

    def end(how):  # how(a): the layer's output
        return lambda st: {**st, "out": how(st["a"])}

    wrong_blocks = {}
    if masked and not bool(case.mask.all()):
        wrong_blocks[MASK_DROPPED] = attend(_block_unmasked(case))
        along = case.self_attn(h, attention_mask=_along_queries(case))
        along = along[0] if isinstance(along, tuple) else along
        wrong_blocks[QUERY_AXIS] = attend(att.LayerNorm(att.dense(along) + h))
    steps = [
        Step(right=attend(case.attn_out), wrong=wrong_blocks),
        Step(
            right=end(lambda a: out.LayerNorm(a + ff(a))),
            wrong={
                FF_RESIDUAL: end(lambda a: out.LayerNorm(ff(a))),
                # the input fed to FF, with the block's output as the residual
                # or not
                FF_FROM_INPUT: (
                    end(lambda a: out.LayerNorm(a + ff(h))),
                    end(lambda a: out.LayerNorm(h + ff(h))),
                ),
                FF_RESIDUAL_FROM_INPUT: end(lambda a: out.LayerNorm(h + ff(a))),
                RELU: end(lambda a: out.LayerNorm(a + ff(a, F.relu))),
                TANH_GELU: end(
                    lambda a: out.LayerNorm(
                        a + ff(a, lambda v: F.gelu(v, approximate="tanh"))
                    )
                ),
                OTHER_LN: end(lambda a: att.LayerNorm(a + ff(a))),
            },
        ),
    ]
    with torch.no_grad():
        ones, pairs = mistaken({}, steps, result=lambda st: st["out"])

        def after_ln(masked_here=True):  # the residual added after each LayerNorm
            sub = att.dense(case.context_of(h, masked=masked_here))
            a_after = att.LayerNorm(sub) + h  # in the attention block, and
            a = case.attn_out
            return (  # in both sublayers, the attention's only, the ff's only
                out.LayerNorm(ff(a_after)) + a_after,
                out.LayerNorm(a_after + ff(a_after)),
                out.LayerNorm(ff(a)) + a,
            )

        ones[AFTER_LN] = after_ln()
        if MASK_DROPPED in wrong_blocks:
            pairs[both(AFTER_LN, MASK_DROPPED)] = after_ln(masked_here=False)[:2]
    return [ones, pairs]


def _along_queries(case: Case) -> torch.Tensor:
    """The additive mask laid along the queries, ``(B, 1, T, 1)``: float32's
    lowest added to a padded query's whole row (what filling it gives too)."""
    return (1.0 - case.mask[:, None, :, None].float()) * torch.finfo(torch.float32).min


def bert_layer_values(fn) -> None:
    """bert_layer maps hidden_states[2] to hidden_states[3] (course model)."""
    for texts in UNPADDED:
        _expect_layer(fn, course_case(texts=texts), masked=False)


def bert_layer_mask(fn) -> None:
    """bert_layer on a padded batch, with its mask."""
    _expect_layer(fn, course_case(padded=True), masked=True)


def bert_layer_random(fn, seed: int) -> None:
    """Other models, layers, batches and padding; the first batch also without a
    mask (attention_mask=None, the default)."""
    verdicts = CaseVerdicts()
    cases = list(random_cases(seed))
    for case in cases:
        with verdicts:
            _expect_layer(fn, case, masked=True)
    with verdicts:
        _expect_layer(fn, _unpadded(cases[0]), masked=False)
    verdicts.fail_if_any()


def _expect_encoder(fn, case: Case, masked: bool = True) -> None:
    model = case.model
    args = (case.ids, case.types, model) + ((case.mask,) if masked else ())
    with LESSONS["bert_encoder"].enforced(args):
        if masked:
            got = call(fn, *args, name="bert_encoder")
        else:
            got = call_naming(fn, *args, name="bert_encoder", case=NO_MASK_FAILS)
    L = model.config.num_hidden_layers
    if not isinstance(got, (tuple, list)):
        fail(
            "bert_encoder should return a tuple of {count} tensors, not a {type_name}.",
            count=L + 1,
            type_name=type(got).__name__,
        )
    verdicts = CaseVerdicts()  # the embeddings left out, and a wrong layer: both
    first = 0  # the hidden state got[0] is
    if len(got) == L:
        with verdicts:
            fail(
                "bert_encoder returned {L} tensors; hidden_states has L + 1 "
                "= {count}: the embedding output comes first.",
                mistake="no-embeddings",
                L=L,
                count=L + 1,
            )
        first = 1  # judged as the layers' outputs it holds
    elif len(got) != L + 1:
        fail(
            "bert_encoder returned {got} tensors; it should return L + 1 = {count}.",
            got=len(got),
            count=L + 1,
        )
    wrong = functools.cache(lambda: _wrong_encoders(case))  # only for a wrong answer

    def diagnose(i: int) -> dict:
        """What the mistakes give as hidden state ``i``."""
        found = {mistake: states[i] for mistake, states in wrong().items()}
        if i >= 1:  # each layer's input kept, not its output: one layer late
            found[STATES_SHIFTED] = case.states[i - 1]
        if i >= 2:  # layer i - 1 fed the embeddings, not layer i - 2's output
            with torch.no_grad():
                layer = model.encoder.layer[i - 1]
                fed = layer(case.states[0], attention_mask=case.ext)
            found[EVERY_LAYER_FED_EMBEDDINGS] = (
                fed[0] if isinstance(fed, tuple) else fed
            )
        return found

    for i, g in enumerate(got, start=first):
        with verdicts:
            expect_close(
                g,
                case.states[i],
                f"bert_encoder(...)[{i - first}]",
                diagnose=functools.partial(diagnose, i),
                what=say("the model's hidden_states[{i}]", i=i),
                atol=3e-4,
                rtol=3e-4,
            )
    verdicts.fail_if_any()


def _wrong_encoders(case: Case) -> dict:
    """``{mistake: hidden states}``: the model run without the mask (where one
    pads something), and with every token type 0 (where some are 1)."""
    model, wrong = case.model, {}
    with torch.no_grad():
        if bool((case.mask == 0).any()):
            wrong[MASK_NOT_PASSED] = model(
                input_ids=case.ids, token_type_ids=case.types
            ).hidden_states
        if case.types is not None and bool(case.types.any()):
            wrong[TYPE_ZERO] = model(
                input_ids=case.ids,
                token_type_ids=torch.zeros_like(case.types),
                attention_mask=case.mask,
            ).hidden_states
    return wrong


MASK_NOT_PASSED = N_(
    "the attention mask was not passed on: padded tokens are attended to.",
    mistake="mask-not-passed",
)


def bert_encoder_length(fn) -> None:
    """bert_encoder returns L + 1 tensors of shape (B, T, D)."""
    case = course_case()
    model = case.model
    got = call(fn, case.ids, case.types, model, case.mask, name="bert_encoder")
    L = model.config.num_hidden_layers
    if not isinstance(got, (tuple, list)) or len(got) != L + 1:
        n = len(got) if isinstance(got, (tuple, list)) else type(got).__name__
        fail(
            "bert_encoder should return a tuple of L + 1 = {count} "
            "tensors (embedding output first); got {n}.",
            count=L + 1,
            n=n,
        )
    for i, g in enumerate(got):
        expect_shape(g, case.states[0].shape, f"bert_encoder(...)[{i}]")


def bert_encoder_values(fn) -> None:
    """bert_encoder equals the model's hidden_states on a padded batch."""
    _expect_encoder(fn, course_case(padded=True))


def bert_encoder_random(fn, seed: int) -> None:
    """Other models, batches, token types and padding, and a batch with no mask
    (attention_mask left at None); two layers at least (with one, an encoder that
    feeds every layer the embeddings would pass)."""
    verdicts = CaseVerdicts()
    cases = list(random_cases(seed, fewest_layers=2))
    for case in cases:
        with verdicts:
            _expect_encoder(fn, case)
    with verdicts:  # and without a mask: attention_mask=None, no padding
        _expect_encoder(fn, _unpadded(cases[0]), masked=False)
    verdicts.fail_if_any()


# --- what the checks compare against: the model's own values for one layer ------------


BY_HAND = N_(
    "Build it from its parts (Linear, LayerNorm, Embedding modules): calling "
    "the block itself is the shortcut this exercise turns off."
)
NO_POSITIONS = N_(
    "the position embeddings are missing: add position_embeddings(arange(T)).",
    mistake="no-positions",
)
NO_TYPES = N_(
    "the token-type embeddings are missing: add token_type_embeddings(token_type_ids).",
    mistake="no-types",
)
TYPE_ZERO = N_(
    "every token got the type-0 embedding: look up token_type_embeddings at "
    "token_type_ids, so that sentence B's tokens get row 1.",
    mistake="types-ignored",
)
NO_NORM = N_(
    "the LayerNorm is missing: embeddings = LayerNorm(word + position + token type).",
    mistake="no-norm",
)
POSITIONS_FROM = N_(
    "the positions start at {k}: BERT's position ids are arange(T), from 0.",
    mistake="positions-offset",
)
STATES_SHIFTED = N_(
    "each layer's input was kept instead of its output: the states come one "
    "layer late (hidden_states[1] is the embedding output again) and the last "
    "layer's output is missing. Keep what a layer returns, after it has run.",
    mistake="states-shifted",
)
EVERY_LAYER_FED_EMBEDDINGS = N_(
    "every layer is fed the embedding output: each layer takes the output of the "
    "layer before it.",
    mistake="fed-embeddings",
)
PRE_LN = N_(
    "pre-LN instead of post-LN: BERT normalises after adding the residual, "
    "LayerNorm(x + sublayer(x)).",
    mistake="pre-ln",
)
AFTER_LN = N_(
    "the residual was added after LayerNorm; BERT computes LayerNorm(x + sublayer(x)).",
    mistake="residual-after-ln",
)
DEFAULT_EPS = N_(
    "the LayerNorm ran at torch's default eps, 1e-5: BERT's LayerNorm has its own "
    "(1e-12), so pass the module's eps on with its weight and bias, or call the "
    "module.",
    mistake="default-eps",
)
NO_MASK_FAILS = N_(
    "bert_encoder(input_ids, token_type_ids, model), with no attention_mask, "
    "fails: the mask's default, None, means no padding (every token may be "
    "attended to), so build the additive mask only when one is given. {verdict}",
    mistake="mask-none-fails",
)
NO_RESIDUAL = N_(
    "the residual connection is missing: LayerNorm(x + sublayer(x)).",
    mistake="no-residual",
)
FF_RESIDUAL = N_(
    "the feed-forward's residual connection is missing: the layer ends with "
    "LayerNorm(a + FF(a)), where a is the attention block's output, not "
    "LayerNorm(FF(a))."
)
FRESH_LN = N_(
    "a new LayerNorm (weight 1, bias 0) was used: call the model's own LayerNorm "
    "module, whose weight and bias were learned.",
    mistake="fresh-layernorm",
)
OTHER_LN = N_(
    "the attention block's LayerNorm was used: the feed-forward has its own, "
    "layer.output.LayerNorm.",
    mistake="other-layernorm",
)
NORM_FIRST = N_(
    "the LayerNorm was applied before every embedding was added: it normalises "
    "the sum, LayerNorm(word + position + token type).",
    mistake="norm-before-sum",
)
FF_FROM_INPUT = N_(
    "the feed-forward was fed the layer's input, not the attention block's output "
    "a: the layer ends with LayerNorm(a + FF(a)).",
    mistake="ff-from-input",
)
FF_RESIDUAL_FROM_INPUT = N_(
    "the feed-forward's residual adds the layer's input: it goes round the "
    "feed-forward only, from the attention block's output a: the layer ends with "
    "LayerNorm(a + FF(a)).",
    mistake="ff-residual-from-input",
)
MASK_DROPPED = N_(
    "padded keys get weight: the attention mask never reached the self-attention. "
    "Pass attention_mask on to it.",
    mistake="mask-dropped",
)
RELU = N_("ReLU instead of GELU: BERT's feed-forward uses GELU.", mistake="relu")
TANH_GELU = N_(
    "the tanh approximation of GELU; BERT's 'gelu' is the exact erf form "
    "(F.gelu(x) with its default).",
    mistake="tanh-gelu",
)
DROPOUT = N_(
    "the result changes from one call to the next: dropout is active. At "
    "inference dropout is off (eval mode, or training=False).",
    mistake="dropout",
)
# Dropout on a tiny tensor often drops nothing, twice: what is left is its 1/(1 - p).
SCALED = N_(
    "the sublayer's output is scaled by 1/(1 - p): dropout is active (this "
    "time it dropped nothing, but still rescaled). At inference dropout is "
    "off (eval mode, or training=False)."
)


_LAYER = ("", ".attention", ".attention.self", ".attention.output")
_LAYER += (".intermediate", ".output")  # a BertLayer's blocks, each called whole
_WHOLE = {  # the argument (its index) that holds the module, and its blocks
    "embeddings_forward": ("2",),  # (ids, types, embeddings)
    "attention_block": ("1", "1.self", "1.output"),  # (hidden, attention, ...)
    "feed_forward": ("1", "1.intermediate", "1.output"),  # (hidden, layer)
    "bert_layer": tuple("1" + part for part in _LAYER),  # (hidden, layer, ...)
    "bert_encoder": ("2", "2.embeddings", "2.encoder")  # (ids, types, model, mask)
    + tuple("2.encoder.layer.*" + part for part in _LAYER),
}
LESSONS = {
    name: Lesson(BY_HAND, FUSED_ATTENTION, whole=modules)
    for name, modules in _WHOLE.items()
}


# Unpadded visible tests run on the sentence pair (token types 0 and 1), then on the
# sample text, so that an answer fitted to one input cannot pass them.
UNPADDED = (data.SENTENCE_PAIR, (data.SAMPLE_TEXT,))


def course_case(padded: bool = False, layer: int = 2, texts=data.SENTENCE_PAIR) -> Case:
    """The course model at ``layer`` on ``texts`` (or a padded batch); the model
    runs once per input and process, each caller gets its own tensors."""
    return own_copy(_course_case(padded, layer, tuple(texts)))


@functools.lru_cache(maxsize=8)
def _course_case(padded: bool, layer: int, texts: tuple) -> Case:
    tok = models.load_tokenizer()
    if padded:
        enc = tok([data.SAMPLE_TEXT, "A short one."], padding=True, return_tensors="pt")
    else:
        enc = tok(*texts, return_tensors="pt")
    return Case(
        models.oracle_model(),
        layer,
        enc["input_ids"],
        enc["attention_mask"],
        types=enc["token_type_ids"],
    )


#: How much larger a tiny random BERT's feed-forward weights are made (its
#: attention's: :data:`oracles.SHARPEN`). At std 0.02 the GELU's inputs
#: are about 0.1 in size, where its tanh approximation is the exact form to 1e-6:
#: the tanh form passed every hidden case. 20 times larger (inputs about 1), it is
#: caught on 40 seeds of 40 (each seed's three cases), while a float64 answer stays
#: within 1.5e-6 of the model.
SHARPEN_FF = 20.0


def _sharpened(model):
    """``model`` with its attention sharpened (:func:`oracles.sharpen_attention`)
    and its feed-forward's weights multiplied by :data:`SHARPEN_FF`; the model
    stays the oracle of its own values."""
    model = sharpen_attention(model)
    with torch.no_grad():
        for block in model.encoder.layer:
            for linear in (block.intermediate.dense, block.output.dense):
                linear.weight.mul_(SHARPEN_FF)
    return model


def random_cases(seed: int, n: int = 3, fewest_layers: int = 1):
    """Tiny BERTs of random sizes (attention sharpened), at a random layer, on
    random batches with token types and padding. The first has several heads: with
    one, a scale by sqrt(D) is the right one."""
    rng = random.Random(seed)
    for i in range(n):
        heads = (2, 4) if i == 0 else (1, 2, 4)
        model = random_tiny_bert(rng, heads=heads, fewest_layers=fewest_layers)
        model = _sharpened(model)
        ids, types, mask = random_batch(rng, token_types=True)
        layer = rng.randrange(model.config.num_hidden_layers)
        yield Case(model, layer, ids, mask, types=types)


def twice(fn, args, name):
    """``fn(*args)``, called again to catch active dropout: twice more for a small
    result (on a few dozen numbers two calls now and then drop the same ones)."""
    a = call(fn, *args, name=name)
    small = isinstance(a, torch.Tensor) and a.numel() <= 4096
    for _ in range(2 if small else 1):
        b = call(fn, *args, name=name)
        if (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.shape == b.shape
            and not equal(a, b)
        ):
            fail("{name}: {why}", name=name, why=DROPOUT)
    return a
