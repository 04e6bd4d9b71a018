"""Checks for 10_visualize: heatmaps, top-attended tokens, previous-token heads.

Oracles: the image and tick labels read back off the returned matplotlib Axes, the
sorted row of the attention matrix, and the model's own ``attentions``.
"""

from __future__ import annotations

import operator
import random

import torch

from .. import models
from ..hints import hint as hint  # the notebook's check.hint("<exercise>")
from ..i18n import N_, say
from ..worked import worked as worked  # check.worked("<exercise>"), once tried
from . import SAMPLE_TEXTS, call, expect_close, fail
from .calls import CaseVerdicts, both
from .compare import either
from .mistaken import fewest

TRANSPOSED = N_(
    "the heatmap is transposed: rows (y axis) are queries and columns (x "
    "axis) are keys, so draw probs itself (imshow(probs)).",
    mistake="heatmap-transposed",
)


#: Tokens a ranking that keeps only words leaves out.
SPECIAL = {"[CLS]", "[SEP]", "[PAD]", ".", ",", "!", "?", ";", ":"}


def _probs_tokens(seed: int, T: int, *, bert: bool = False):
    """A (T, T) attention matrix and its tokens. ``bert`` (T >= 4): the tokens of
    a BERT input, [CLS] first, then words, a full stop and [SEP], with [SEP] much
    attended, as BERT's heads often do; a ranking must count them too."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(T, T, generator=g) * 2
    tokens = [f"tok{i}" for i in range(T)]
    if bert and T >= 4:
        tokens = ["[CLS]", *tokens[1 : T - 2], ".", "[SEP]"]
        scores[:, -1] += 3.0
    return torch.softmax(scores, -1), tokens


def _drawn(got, probs, tokens, *ax) -> dict:
    """What the returned Axes shows, as plain data (taken where the answer ran)."""
    from matplotlib.axes import Axes

    if not isinstance(got, Axes):
        return {"type": type(got).__name__}
    out = {"type": "Axes", "on_given": bool(ax) and got is ax[0], "image": None}
    if got.images:
        array = got.images[-1].get_array().filled(float("nan"))
        out["image"] = torch.as_tensor(array, dtype=torch.float64)
    got.figure.canvas.draw()
    x, y = got.get_xticklabels(), got.get_yticklabels()
    out["x"] = _in_view(
        [(t.get_position()[0], t.get_text()) for t in x], got.get_xlim()
    )
    out["y"] = _in_view(
        [(t.get_position()[1], t.get_text()) for t in y], got.get_ylim()
    )
    return out


def _in_view(ticks: list, limits) -> list[tuple[float, str]]:
    """``(position, text)`` of the tick labels inside the axis' view, those drawn."""
    lo, hi = sorted(float(v) for v in limits)
    return [(float(at), text) for at, text in ticks if lo - 1e-9 <= at <= hi + 1e-9]


def _labels_match(ticks: list[tuple[float, str]], tokens: list[str]) -> bool:
    """Whether the labels drawn name each row/column by its token, at its centre
    (0 .. T-1), and nothing else: empty labels elsewhere, as ``[''] + tokens`` with a
    tick every unit leaves at the image's edges, are none."""
    shown = [(at, text) for at, text in ticks if text]
    at_centres = {round(at): text for at, text in shown if abs(at - round(at)) < 1e-6}
    return len(at_centres) == len(shown) and at_centres == dict(enumerate(tokens))


def _elsewhere_current(fn):
    """``fn``, called with another figure current than the Axes it is given (as
    when a notebook hands it one Axes of a grid, or an earlier figure): drawn with
    ``plt.*``, its picture lands there, not on that Axes."""
    if not callable(fn):
        return fn  # call says what it is

    def attention_heatmap(*args):
        import matplotlib.pyplot as plt

        plt.figure()  # current now: the given Axes (the answer's copy) is not
        return fn(*args)

    return attention_heatmap


def _expect_heatmap(fn, probs, tokens, given_ax: bool) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    try:
        args = (probs.clone(), list(tokens)) + ((ax,) if given_ax else ())
        drawer = _elsewhere_current(fn) if given_ax else fn
        got = call(drawer, *args, name="attention_heatmap", probe=_drawn)
    finally:
        plt.close("all")
    if got["type"] != "Axes":
        fail(
            "attention_heatmap should return the matplotlib Axes it drew "
            "on, not {got}.",
            got=got["type"],
        )
    if given_ax and not got["on_given"]:
        fail(
            "attention_heatmap was given an Axes (ax=...) but drew "
            "elsewhere: draw on the ax you are given.",
            mistake="other-axes",
        )
    if got["image"] is None:
        fail("attention_heatmap drew no image: use ax.imshow(probs).")
    expect_close(
        got["image"],
        probs.double(),
        say("the heatmap's image"),
        diagnose={TRANSPOSED: probs.double().T},
        what="probs",
    )
    for axis in ("x", "y"):
        if _labels_match(got[axis], list(tokens)[1:]):
            fail(
                "The {axis} tick labels are one column off: column i shows token "
                "i+1, the first token is on a tick outside the image. Set the "
                "ticks with their labels: ax.set_{axis}ticks(range(len(tokens)), "
                "tokens).",
                axis=axis,
            )
        if not _labels_match(got[axis], list(tokens)):
            labels = [text for _, text in got[axis]]
            fail(
                "The {axis} tick labels should be the tokens, one per "
                "row/column, in order; they are {labels}{more}.",
                axis=axis,
                labels=labels[:6],
                more="..." if len(labels) > 6 else "",
            )


def heatmap_image(fn) -> None:
    """The returned Axes shows probs as an image (not transposed)."""
    probs, tokens = _probs_tokens(0, 6)
    _expect_heatmap(fn, probs, tokens, given_ax=False)


def heatmap_given_ax(fn) -> None:
    """With ax=..., it draws on that Axes, tokens as tick labels on both axes."""
    probs, tokens = _probs_tokens(1, 9)
    _expect_heatmap(fn, probs, tokens, given_ax=True)


def heatmap_random(fn, seed: int) -> None:
    """Other sizes and tokens."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    for i in range(3):
        with verdicts:
            probs, tokens = _probs_tokens(seed + i, rng.randint(2, 14))
            _expect_heatmap(fn, probs, tokens, given_ax=bool(i % 2))
    verdicts.fail_if_any()


def _indices(got, T: int) -> list[int] | None:
    """``got`` read as positions of tokens (ints from 0 to T - 1: a list of them,
    or a 1-D tensor of ints), or None."""
    if isinstance(got, torch.Tensor):
        if got.dim() != 1 or got.dtype.is_floating_point or got.dtype == torch.bool:
            return None
        got = got.tolist()
    if not isinstance(got, (list, tuple)) or any(isinstance(i, bool) for i in got):
        return None
    try:
        out = [operator.index(i) for i in got]
    except TypeError:
        return None
    return out if all(0 <= i < T for i in out) else None


def _expect_top(fn, probs, tokens, *, q: int, k: int) -> None:
    """top_attended's tokens; returned as positions, the type is said and the
    tokens at those positions are judged on, so that what they rank is said too."""
    got = call(fn, probs.clone(), list(tokens), q, k, name="top_attended")
    if isinstance(got, (list, tuple)) and all(isinstance(t, str) for t in got):
        _judge_top(list(got), probs, tokens, q=q, k=k)  # a tuple is as good
        return
    verdicts = CaseVerdicts()
    with verdicts:
        fail(
            "top_attended should return a list (or tuple) of str (tokens), "
            "not {got!r:.80}.",
            got=got,
        )
    positions = _indices(got, len(tokens))
    if positions is not None:
        with verdicts:
            _judge_top([tokens[j] for j in positions], probs, tokens, q=q, k=k)
    verdicts.fail_if_any()


def _judge_top(got: list, probs, tokens, *, q: int, k: int) -> None:
    order = sorted(range(len(tokens)), key=lambda j: (-float(probs[q, j]), j))
    want = [tokens[j] for j in order[:k]]
    if got == want:
        return
    col = sorted(range(len(tokens)), key=lambda j: (-float(probs[j, q]), j))
    if got == [tokens[j] for j in col[:k]]:
        fail(
            "top_attended read the column: what query i attends to is row i of probs.",
            mistake="column",
        )
    words = [tokens[j] for j in order if tokens[j] not in SPECIAL][:k]
    if any(t in SPECIAL for t in want) and got[: len(words)] == words:
        fail(
            "top_attended left out [CLS], [SEP] or punctuation: rank every token. "
            "BERT's heads often attend most to [CLS], [SEP] and full stops, and a "
            "picture of attention should show it.",
            mistake="skips-special",
        )
    others = [tokens[j] for j in order if j != q]  # the query's token last, or gone
    if q in order[:k] and got in (others[:k], (others + [tokens[q]])[:k]):
        fail(SKIPS_SELF)
    if got == list(reversed(want)) or got == [tokens[j] for j in order[::-1][:k]]:
        fail(
            "top_attended is in the wrong order: most attended first.", mistake="order"
        )
    fail(
        "top_attended(probs, tokens, {q}, {k}) should be {want}, not {got}.",
        q=q,
        k=k,
        want=want,
        got=got,
    )


def top_attended_small(fn) -> None:
    """top_attended on a 6-token matrix, most attended first."""
    probs, tokens = _probs_tokens(2, 6)
    _expect_top(fn, probs, tokens, q=2, k=3)


def top_attended_random(fn, seed: int) -> None:
    """Other sizes, queries and k, on a BERT input's tokens ([CLS], words, a full
    stop, [SEP])."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    for i in range(5):
        with verdicts:
            T = rng.randint(2, 12) if i else rng.randint(4, 12)
            probs, tokens = _probs_tokens(seed + i, T, bert=True)
            # the first case asks for one token: squeeze() on topk's one index
            k = 1 if i == 0 else rng.randint(1, T)  # leaves a 0-d tensor
            _expect_top(fn, probs, tokens, q=rng.randrange(T), k=k)
    with verdicts:  # a word that attends to itself most
        probs, tokens = _probs_tokens(seed + 5, 8, bert=True)
        q = 1 + seed % 5
        row = probs[q].clone()
        row[q] = 2 * row.max()  # the query's own token first
        probs[q] = row / row.sum()
        _expect_top(fn, probs, tokens, q=q, k=3)
    verdicts.fail_if_any()


def _diagonal_score(attentions, offset: int = -1) -> torch.Tensor:
    """(L, H): mean weight each query puts on the token ``offset`` away from it
    (-1: the token just before it, the previous-token score)."""
    rows = []
    for layer in attentions:
        diag = torch.diagonal(
            layer.double(), offset=offset, dim1=-2, dim2=-1
        )  # (B, H, T - |offset|)
        rows.append(diag.mean(dim=(0, 2)))
    return torch.stack(rows)


def _pairs(score: torch.Tensor, keep) -> set[tuple[int, int]]:
    """``{(layer, head)}`` where ``keep(score)`` holds."""
    return {(int(i), int(j)) for i, j in keep(score).nonzero().tolist()}


SKIPS_SELF = N_(
    "top_attended left out the query's own token: rank every key, the query "
    "itself included. A token often attends to itself, and a picture of "
    "attention should show it.",
    mistake="skips-self",
)
STRICT = N_(
    "previous_token_heads left out a head whose mean is exactly the threshold: "
    "keep the heads whose mean is at least threshold (>=), not above it (>).",
    mistake="strict",
)
NEXT_TOKEN = N_(
    "previous_token_heads looked at the next token (offset +1); the previous token "
    "of query i is key i - 1 (offset -1).",
    mistake="next",
)
OVER_T = N_(
    "previous_token_heads divides by T, all the queries: query 0 has no "
    "previous token, so average over the T - 1 queries that have one.",
    mistake="over-t",
)
DIAGONAL = N_(
    "previous_token_heads looked at the diagonal (each token itself); the "
    "previous token is one below it (offset -1).",
    mistake="diagonal",
)
HEAD_LAYER = N_(
    "previous_token_heads returned (head, layer) pairs: each pair is (layer, head).",
    mistake="head-layer",
)
WRAPPED = N_(
    "previous_token_heads counted query 0 too: its i - 1 is -1, which wraps round "
    "to the last key. Only queries 1 to T - 1 have a previous token.",
    mistake="wraps-to-last",
)
FIRST_EXAMPLE = N_(
    "previous_token_heads averaged the first example only: take the mean over the "
    "batch too.",
    mistake="first-example",
)


def _name_prev_mistake(got_set, attentions, threshold: float) -> None:
    """Fail naming the mistake whose heads ``got_set`` is, if it is one."""
    score = _diagonal_score(attentions)
    T = attentions[0].shape[-1]
    first = _diagonal_score(tuple(a[:1] for a in attentions))
    if got_set != _pairs(score, lambda s: s >= threshold) and got_set == _pairs(
        score, lambda s: s > threshold
    ):
        fail(STRICT)
    if got_set == _pairs(score * (T - 1) / T, lambda s: s >= threshold):
        fail(OVER_T)
    if got_set == _pairs(first, lambda s: s >= threshold):
        fail(FIRST_EXAMPLE)
    want = _pairs(score, lambda s: s >= threshold)
    if want and got_set == {(h, ly) for ly, h in want} != want:
        fail(HEAD_LAYER)


def _judge_prev(got_set: set, attentions, threshold: float) -> None:
    """Fail naming the mistake that gives the heads ``got_set`` on this case."""
    score = _diagonal_score(attentions)
    want = [tuple(map(int, ij)) for ij in (score >= threshold).nonzero().tolist()]
    if got_set == set(want):
        return

    def reached(score) -> set[tuple[int, int]]:
        return _pairs(score, lambda s: s >= threshold)

    after = _diagonal_score(attentions, 1)
    if got_set == reached(after):
        fail(NEXT_TOKEN)
    if got_set == _pairs(after, lambda s: s > threshold):  # and > for >=
        fail(both(NEXT_TOKEN, STRICT))
    # both mistakes at once: the next token, in the first example only
    if got_set == reached(_diagonal_score(tuple(a[:1] for a in attentions), 1)):
        fail(both(NEXT_TOKEN, FIRST_EXAMPLE))
    _name_prev_mistake(got_set, attentions, threshold)
    if got_set == reached(_diagonal_score(attentions, 0)):
        fail(DIAGONAL)
    fail(
        "previous_token_heads found {got_set}, but the heads whose mean "
        "attention to the previous token is >= {threshold} are {want}.",
        got_set=sorted(got_set)[:8],
        threshold=threshold,
        want=want[:8],
    )


def _heads_found(
    attentions, threshold: float, mistakes: frozenset[str]
) -> list[set[tuple[int, int]]]:
    """The sets of (layer, head) pairs an answer with ``mistakes`` finds (one per
    way of making them): the next token or the diagonal read (over every query,
    or from query 1 on, as the previous token's is), ``>`` for ``>=``, the first
    example only, a sum over the queries divided by T, query 0 counted with its
    key -1 (the last), (head, layer) pairs."""
    offset = 1 if NEXT_TOKEN in mistakes else 0 if DIAGONAL in mistakes else -1
    if FIRST_EXAMPLE in mistakes:
        attentions = tuple(a[:1] for a in attentions)
    T = attentions[0].shape[-1]
    scores = [_diagonal_score(attentions, offset)]
    if WRAPPED in mistakes:  # query 0's key -1: the last, added to the T - 1 terms
        wrapped = torch.stack([a.double()[:, :, 0, -1].mean(0) for a in attentions])
        scores = [score + wrapped / (T - 1) for score in scores]
    if offset == 0:  # the diagonal from query 1 on: T - 1 queries, as offset -1
        scores.append(_diagonal_score(tuple(a[..., 1:, 1:] for a in attentions), 0))
    if OVER_T in mistakes:
        scores = [score * (T - abs(offset)) / T for score in scores]
    keep = (
        (lambda s: s > threshold) if STRICT in mistakes else (lambda s: s >= threshold)
    )
    found = [_pairs(score, keep) for score in scores]
    if HEAD_LAYER in mistakes:
        found = [{(head, layer) for layer, head in heads} for heads in found]
    return found


def _explained(found: list, cases: list) -> list[tuple[str, ...]]:
    """The fewest known mistakes (one, else two) that give every set of heads an
    answer ``found`` on its ``cases`` ((attentions, threshold) each)."""
    known = (NEXT_TOKEN, DIAGONAL, STRICT, FIRST_EXAMPLE, WRAPPED, OVER_T, HEAD_LAYER)

    def fits(chosen: tuple[str, ...]) -> bool:
        return bool(
            {NEXT_TOKEN, DIAGONAL} - set(chosen)  # one offset at a time
            and not (DIAGONAL in chosen and OVER_T in chosen)  # T of T: no change
            and not (WRAPPED in chosen and {NEXT_TOKEN, DIAGONAL} & set(chosen))
            and all(
                got in _heads_found(attentions, threshold, frozenset(chosen))
                for got, (attentions, threshold) in zip(found, cases, strict=True)
            )
        )

    return fewest(known, fits, most=2)


def _expect_prev_cases(fn, cases: list) -> None:
    """previous_token_heads on every (attentions, threshold) case: where its sets
    of heads are wrong, the fewest known mistakes that give all of them are
    named; else each wrong case's own verdict."""
    found = []
    for attentions, threshold in cases:
        got = call(fn, attentions, threshold, name="previous_token_heads")
        try:
            found.append({(int(a), int(b)) for a, b in got})
        except (TypeError, ValueError):
            fail(
                "previous_token_heads should return a list of (layer, head) pairs "
                "of ints."
            )
    right = [_heads_found(a, t, frozenset())[0] for a, t in cases]
    if found == right:
        return
    fits = _explained(found, cases)
    if fits:
        fail(
            either(
                [both(*chosen) if len(chosen) == 2 else chosen[0] for chosen in fits]
            )
        )
    verdicts = CaseVerdicts()
    for got, (attentions, threshold) in zip(found, cases, strict=True):
        with verdicts:
            _judge_prev(got, attentions, threshold)
    verdicts.fail_if_any()


def previous_token_heads_model(fn) -> None:
    """On the course model's attentions for the sample text (and one more)."""
    model, tok = models.oracle_model(), models.load_tokenizer()
    cases = []
    for text in SAMPLE_TEXTS:
        with torch.no_grad():
            attentions = model(**tok(text, return_tensors="pt")).attentions
        cases += [(attentions, threshold) for threshold in (0.3, 0.5)]
    _expect_prev_cases(fn, cases)


def previous_token_heads_random(fn, seed: int) -> None:
    """Synthetic attentions with planted previous-token, self and next-token heads."""
    verdicts = CaseVerdicts()
    g = torch.Generator().manual_seed(seed)
    L, H, T = 3, 6, 7
    attentions = []
    for layer in range(L):
        with verdicts:
            probs = torch.softmax(torch.randn(2, H, T, T, generator=g), -1)
            for head in range(H):  # planted heads: previous token, itself, next token
                shift = (-1, 0, 1)[(layer + head + seed) % 3]
                planted = torch.eye(T).roll(shift, dims=1)
                probs[:, head] = 0.1 * probs[:, head] + 0.9 * planted
            attentions.append(probs)
    last = attentions[-1]
    # At the threshold 0.5 exactly: "at least" takes it in, and a mean over all T
    # queries (query 0 has no previous token) leaves it out.
    last[:, 0] = torch.full((T, T), 0.5 / (T - 1)) * (1 - torch.eye(T).roll(-1, 1))
    last[:, 0] += 0.5 * torch.eye(T).roll(-1, dims=1)
    last[:, 0, 0] = 1 / T
    # And a next-token head at 0.5 exactly: the next token read with > for >=
    # leaves it out.
    nxt = torch.eye(T).roll(1, dims=1)
    last[:, 2] = torch.full((T, T), 0.5 / (T - 1)) * (1 - nxt) + 0.5 * nxt
    # A previous-token head in the first example (1.0), barely in the second
    # (0.1): its mean over the batch, 0.55, is under 0.6, and over 0.5, where a
    # mean over all T queries (0.47) is not.
    last[0, 1] = torch.eye(T).roll(-1, dims=1)
    last[1, 1] = 0.9 * torch.eye(T) + 0.1 * torch.eye(T).roll(-1, dims=1)
    last[:, 1, 0] = torch.eye(T)[0]
    # A next-token head likewise (1.0, then 0.1: 0.55 over the batch), so that the
    # next token read in the first example only shows as both mistakes.
    last[0, 3] = nxt
    last[1, 3] = 0.9 * torch.eye(T) + 0.1 * nxt
    # A previous-token head at 0.52 in both: in at 0.5 with > as with >=, out where
    # the mean is over all T queries (0.45): the two mistakes told apart.
    last[:, 4] = 0.52 * torch.eye(T).roll(-1, dims=1) + 0.48 * torch.eye(T)
    last[:, 4, 0] = torch.eye(T)[0]  # query 0 has no previous token
    # A previous-token head at 0.48, under 0.5, whose query 0 looks at the last
    # key: counted as query 0's "previous" token (key -1), its mean is (6 * 0.48
    # + 1) / 6 = 0.65, in at 0.5 and 0.6 (over all T queries: 0.55, in at 0.5 only).
    last[:, 5] = 0.48 * torch.eye(T).roll(-1, dims=1) + 0.52 * torch.eye(T)
    last[:, 5, 0] = torch.eye(T)[T - 1]
    verdicts.fail_if_any()
    # 0.5 first: the ties
    _expect_prev_cases(fn, [(tuple(attentions), t) for t in (0.5, 0.2, 0.6)])
