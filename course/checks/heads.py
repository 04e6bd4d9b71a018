"""Checks for 03_head_slicing (04_split_heads has :mod:`.split`).

Oracles: the projection module's own output split into heads (``linear(x)`` viewed as
(..., T, H, d)), and bertviz's neuron-view ``queries``/``keys``.
"""

from __future__ import annotations

import math
import random

import torch

from .. import data, models
from ..hints import hint as hint  # the notebook's check.hint("<exercise>")
from ..i18n import N_, say
from ..worked import worked as worked  # check.worked("<exercise>"), once tried
from . import SAMPLE_TEXTS, call, expect_close, expect_shape, fail, given
from .calls import CaseVerdicts
from .lessons import Lesson
from .mistaken import Step, mistaken
from .oracles import sample_qk

SLICE = N_(
    "Project with this head's rows only (W_h, b_h); calling the whole layer "
    "is the shortcut this exercise turns off."
)
LESSONS = {"project_head": Lesson(SLICE, whole=("1",))}  # project_head(x, linear, ..)

COLUMNS = N_(
    "sliced columns: the head lives in rows. Linear stores W as (out, in), "
    "so head h owns rows h*d:(h+1)*d.",
    mistake="columns",
)
OFFSET = N_("took rows [h:h+d]; head h starts at row h*d.", mistake="start")
INTERLEAVED = N_(
    "the out features were split as (d, H) instead of (H, d): head h got every "
    "H-th row (h, h+H, h+2H, ...), but it owns the block of rows h*d:(h+1)*d.",
    mistake="interleaved-rows",
)
WHOLE_BIAS = N_(
    "the whole bias, every head's entries: one head's bias is its slice "
    "b[h*d:(h+1)*d].",
    mistake="whole-bias",
)
ROWS_FROM = N_(
    "W_h for head {head} is rows {first}:{last} of the weight; the head owns rows "
    "{start}:{end}, from h*d to (h+1)*d.",
    mistake="rows-from",
)
PAST_THE_END = N_(
    "W_h has {got} rows instead of d = {d}: its slice reaches past the layer's "
    "last row (it has H*d = {rows}), so it must start too far down; head {head} "
    "owns rows {start}:{end}, from h*d to (h+1)*d.",
    mistake="past-the-end",
)
HEAD0_BIAS = N_(
    "the bias added is head 0's slice, b[:d], whatever the head: head h adds "
    "b[h*d:(h+1)*d].",
    mistake="head0-bias",
)
BIAS_START = N_(
    "the bias added is b[h:h+d]; head h's bias starts at h*d too: b[h*d:(h+1)*d].",
    mistake="bias-start",
)


def _head_truth(linear, head, d):
    """(W_h, b_h) recovered from the module's outputs only."""
    D_in = linear.in_features
    with torch.no_grad():
        zero = linear(torch.zeros(1, D_in))[0]  # the bias
        cols = linear(torch.eye(D_in)) - zero  # (D_in, D_out): row i is W[:, i]
    W, b = cols.T, zero
    return W[head * d : (head + 1) * d], b[head * d : (head + 1) * d]


def _random_linears(seed: int, n: int = 4):
    """``n`` random ``(Linear(H*d, H*d), H, d, head)``; the first head is not 0."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    for i in range(n):
        H, d = rng.choice([2, 3, 4, 6]), rng.choice([2, 5, 8])
        lin = torch.nn.Linear(H * d, H * d)
        with torch.no_grad():
            lin.weight.copy_(torch.randn(H * d, H * d, generator=gen))
            lin.bias.copy_(torch.randn(H * d, generator=gen))
        yield lin, H, d, rng.randrange(1 if i == 0 else 0, H)  # 0 hides an offset


def _course_query(layer: int = 0):
    model = models.oracle_model()
    return model.encoder.layer[layer].attention.self.query, model.config


def _interleaved(t: torch.Tensor, head: int, d: int) -> torch.Tensor:
    """Head ``head``'s rows of ``t`` (out features first) split as (d, H)."""
    H = t.shape[0] // d
    return t.reshape(d, H, *t.shape[1:])[:, head]


def _get_head(fn, linear, head, d):
    got = call(fn, linear, head, d, name="head_params")
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        fail("head_params should return a pair (W_h, b_h).")
    return got


def _expect_weight(fn, linear, head, d) -> None:
    # The truth first: the student's call may change the module it is handed.
    want, _ = _head_truth(linear, head, d)
    W = linear.weight.detach().clone()
    W_h, _ = _get_head(fn, linear, head, d)
    if isinstance(W_h, torch.Tensor) and tuple(W_h.shape) == (linear.in_features, d):
        fail(
            "W_h has shape {shape} = (D, d): {why}", shape=tuple(W_h.shape), why=COLUMNS
        )
    _expect_rows_taken(W_h, W, head, d)
    expect_shape(W_h, want.shape, "W_h", say("One head's weight is (d, D)."))
    diagnose = {COLUMNS: W[:, head * d : (head + 1) * d].T}
    if linear.out_features > d:
        diagnose[INTERLEAVED] = _interleaved(W, head, d)
    if head:
        diagnose[OFFSET] = W[head : head + d]
    expect_close(
        W_h,
        want,
        say("W_h for head {head}", head=head),
        diagnose=diagnose,
        what=say("that head's rows of the layer"),
    )


def _expect_rows_taken(W_h, W, head: int, d: int) -> None:
    """Name a W_h that is a block of W's rows other than the head's: fewer than d
    of them, the layer's last ones (or none: a slice that starts too far down
    and stops at the end of the weight), or d of them from another start (rows
    [h:h+d] are OFFSET's, named by expect_close)."""
    if not isinstance(W_h, torch.Tensor) or W_h.ndim != 2 or W_h.shape[1] != W.shape[1]:
        return
    got, rows = W_h.shape[0], W.shape[0]
    first = next(
        (
            i
            for i in range(rows - got + 1)
            if W_h.dtype == W.dtype and torch.equal(W_h.detach(), W[i : i + got])
        ),
        None,
    )
    where = {"head": head, "start": head * d, "end": (head + 1) * d}
    if got < d and (got == 0 or first == rows - got):
        fail(PAST_THE_END, got=got, d=d, rows=rows, **where)
    if got == d and first not in (None, head * d, head):
        fail(ROWS_FROM, first=first, last=first + d, **where)


def _expect_bias(fn, linear, head, d) -> None:
    _, want = _head_truth(linear, head, d)  # before the call, as above
    b = linear.bias.detach().clone()
    _, b_h = _get_head(fn, linear, head, d)
    if b_h is None:
        fail(
            "b_h is None: the bias of the head's outputs is part of the "
            "head (b[h*d:(h+1)*d])."
        )
    _expect_bias_shape(b_h, d, linear.out_features)
    diagnose = {}
    if linear.out_features > d:
        diagnose[INTERLEAVED] = _interleaved(b, head, d)
    if head:
        diagnose[HEAD0_BIAS] = b[:d]
    expect_close(
        b_h,
        want,
        say("b_h for head {head}", head=head),
        diagnose=diagnose,
        what=say("that head's slice of the bias"),
    )


def _expect_bias_shape(b_h, d: int, out_features: int) -> None:
    """b_h is (d,); the whole bias, (D,), is named."""
    whole = isinstance(b_h, torch.Tensor) and tuple(b_h.shape) == (out_features,)
    if whole and out_features != d:
        fail(
            "b_h has shape {shape} = (D,): {why}",
            shape=tuple(b_h.shape),
            why=WHOLE_BIAS,
        )
    expect_shape(b_h, (d,), "b_h", say("One head's bias is (d,)."))


def _expect_head(fn, linear, head, d) -> None:
    """W_h, then b_h, each checked even where the other is wrong: an answer with
    a wrong weight and a wrong bias hears of both."""
    parts = CaseVerdicts()
    with parts:
        _expect_weight(fn, linear, head, d)
    with parts:
        _expect_bias(fn, linear, head, d)
    parts.fail_if_any()


def head_params_shape(fn) -> None:
    """head_params gives W_h (d, D) and b_h (d,) for the course model's query."""
    linear, c = _course_query()
    d = c.hidden_size // c.num_attention_heads
    W_h, b_h = _get_head(fn, linear, 1, d)
    parts = CaseVerdicts()  # a wrong weight and a wrong bias: both named
    with parts:
        if isinstance(W_h, torch.Tensor) and tuple(W_h.shape) == (c.hidden_size, d):
            fail(
                "W_h has shape {shape} = (D, d): {why}",
                shape=tuple(W_h.shape),
                why=COLUMNS,
            )
        shape = (d, c.hidden_size)
        expect_shape(W_h, shape, "W_h", say("One head's weight is (d, D)."))
    with parts:
        _expect_bias_shape(b_h, d, c.hidden_size)
    parts.fail_if_any()


def head_params_weight(fn) -> None:
    """W_h is the head's block of rows, for heads 0 and 5 of layer 0's query."""
    linear, c = _course_query()
    d = c.hidden_size // c.num_attention_heads
    for head in (0, 5):
        _expect_weight(fn, linear, head, d)


def head_params_bias(fn) -> None:
    """b_h is the head's slice of the bias."""
    linear, c = _course_query()
    d = c.hidden_size // c.num_attention_heads
    for head in (0, 5):
        _expect_bias(fn, linear, head, d)


def head_params_random(fn, seed: int) -> None:
    """Other head counts, head sizes and heads."""
    verdicts = CaseVerdicts()
    for linear, _, d, head in _random_linears(seed):
        with verdicts:
            _expect_head(fn, linear, head, d)
    verdicts.fail_if_any()


NO_BIAS = N_("the bias is missing: y = x @ W_h.T + b_h.", mistake="no-bias")
PROJECTED_BY_COLUMNS = N_(
    "x @ W[:, h*d:(h+1)*d] takes the head's block of columns, as if y = x W: "
    "Linear computes x @ W.T, so head h owns the rows h*d:(h+1)*d of W, and "
    "y_h = x @ W_h.T + b_h.",
    mistake="weight-columns",
)

PRESCALED = N_(
    "the projection was divided by sqrt(d): a head's projection is the Linear's "
    "output for its rows alone, y_h = x @ W_h.T + b_h; the 1/sqrt(d) belongs to "
    "the scores, Q K^T / sqrt(d).",
    mistake="projection-scaled",
)


NO_TRANSPOSE = N_(
    "x @ W_h without .T: Linear stores W as (out, in).", mistake="weight-no-transpose"
)


def _projection_steps(linear, *, head: int, d: int) -> list[Step]:
    """One head's projection step by step (the head's rows and bias sliced, the
    bias added, no scale), with the ways each step goes wrong. The state: ``x``;
    then ``W`` (D_in, d), what x is multiplied by, and ``b``; then ``y``."""
    W, bias = linear.weight.detach(), linear.bias.detach()  # (H*d, D_in), (H*d,)
    H = W.shape[0] // d
    start = head * d
    rows = slice(start, start + d)  # the head's rows
    square = W.shape[0] == W.shape[1]  # else x @ W[:, rows] cannot fit

    def sliced(weight, b):
        return lambda st: {**st, "W": weight, "b": b}

    def unless(possible: bool, way):
        return way if possible else lambda st: None

    at = slice(head, head + d)  # rows [h:h+d]: the same as h*d only for head 0
    slicing = Step(
        right=sliced(W[rows].T, bias[rows]),
        wrong={
            OFFSET: unless(head > 0 and d > 1, sliced(W[at].T, bias[at])),
            INTERLEAVED: unless(H > 1 and d > 1, sliced(W[head::H].T, bias[head::H])),
            PROJECTED_BY_COLUMNS: unless(square, sliced(W[:, rows], bias[rows])),
            NO_TRANSPOSE: unless(d == W.shape[1], sliced(W[rows], bias[rows])),
        },
    )
    adding = Step(
        right=lambda st: {**st, "y": st["x"] @ st["W"] + st["b"]},
        wrong={
            NO_BIAS: lambda st: {**st, "y": st["x"] @ st["W"]},
            HEAD0_BIAS: unless(
                head > 0, lambda st: {**st, "y": st["x"] @ st["W"] + bias[:d]}
            ),
            BIAS_START: unless(
                head > 0 and d > 1,  # else [h:h+d] is [h*d:(h+1)*d]
                lambda st: {**st, "y": st["x"] @ st["W"] + bias[at]},
            ),
        },
    )
    scaling = Step(
        right=lambda st: st,
        wrong={PRESCALED: lambda st: {**st, "y": st["y"] / math.sqrt(d)}},
    )
    return [slicing, adding, scaling]


def _expect_projection(fn, x, linear, *, head, d) -> None:
    with torch.no_grad():
        full = linear(x)  # (..., T, H*d)
    want = full[..., head * d : (head + 1) * d]
    args = (x, linear, head, d)
    with LESSONS["project_head"].enforced(args):
        try:
            got = call(fn, *args, name="project_head")
        except AssertionError as err:
            if "cannot be multiplied" in str(err):
                fail(
                    "{err} Linear stores W as (out, in): project with x "
                    "@ W_h.T, not x @ W_h.",
                    err=err,
                )
            raise
    expect_close(
        got,
        want,
        f"project_head(x, linear, {head}, {d})",
        diagnose=lambda: mistaken(
            {"x": x},
            _projection_steps(linear, head=head, d=d),
            result=lambda st: st["y"],
        ),
        what=say("the layer's own output for that head"),
    )


def project_head_course(fn) -> None:
    """project_head on the sample text's embeddings equals the query output of head 3."""
    linear, c = _course_query()
    d = c.hidden_size // c.num_attention_heads
    for text in SAMPLE_TEXTS:
        _expect_projection(fn, sample_embeddings(text), linear, head=3, d=d)


def project_head_random(fn, seed: int) -> None:
    """Other sizes, heads, batch shapes."""
    verdicts = CaseVerdicts()
    gen = torch.Generator().manual_seed(seed)
    for i, (linear, H, d, head) in enumerate(_random_linears(seed)):
        with verdicts:
            batch = [(), (2,), (2, 3), (1,)][i % 4]
            x = torch.randn(*batch, 5, H * d, generator=gen)
            _expect_projection(fn, x, linear, head=head, d=d)
    verdicts.fail_if_any()


def sample_embeddings(text: str = data.SAMPLE_TEXT) -> torch.Tensor:
    """The course model's embedding output (hidden_states[0]) of ``text``, (T, D)."""
    model, tok = models.oracle_model(), models.load_tokenizer()
    with torch.no_grad():
        out = model(**tok(text, return_tensors="pt"))
    return out.hidden_states[0][0]


def _neuron_view(layer: int = 0):
    """bertviz's neuron-view queries and keys, (H, T, d) each, for the sample text."""
    queries, keys = sample_qk(layer)
    return queries[0], keys[0]


def first_head_q(Q) -> None:
    """Q of layer 0, head 0 equals bertviz's neuron-view queries."""
    Q = given(Q, "Q_first_head_first_layer")
    queries, _ = _neuron_view()
    expect_close(
        Q,
        queries[0],
        "Q_first_head_first_layer",
        what=say("bertviz's neuron-view queries"),
    )


def first_head_k(K) -> None:
    """K of layer 0, head 0 equals bertviz's neuron-view keys."""
    K = given(K, "K_first_head_first_layer")
    _, keys = _neuron_view()
    diagnose = {N_("this is Q, not K.", mistake="q-for-k"): _neuron_view()[0][0]}
    expect_close(
        K,
        keys[0],
        "K_first_head_first_layer",
        diagnose=diagnose,
        what=say("bertviz's neuron-view keys"),
    )


def first_head_v(V) -> None:
    """V of layer 0, head 0 equals the value projection's output for head 0."""
    V = given(V, "V_first_head_first_layer")
    value = models.oracle_model().encoder.layer[0].attention.self.value
    c = models.oracle_model().config
    d = c.hidden_size // c.num_attention_heads
    with torch.no_grad():
        want = value(sample_embeddings())[:, :d]
    expect_close(
        V,
        want,
        "V_first_head_first_layer",
        what=say("the value layer's output for head 0"),
    )
