"""The steps of scaled dot-product attention, each with the ways it goes wrong.

The middle of every attention exercise is the same computation: scores from the
queries and keys, scaled, masked, a softmax, the values weighed, the heads merged.
These builders give those steps as :class:`~course.checks.mistaken.Step`\\ s over
one state, so that 06 (BERT's heads), 09 (a module of the student's own) and 13
(cross-attention) each add only their own first and last steps. The verdicts are
arguments: each exercise names a mistake in its own words.

The state: ``q`` (..., Tq, d), ``k`` and ``v`` (..., Tk, d); ``keep`` a bool mask
broadcastable to the scores (True = may attend) or None; then, as the steps run,
``scaled``, ``s`` (masked), ``p`` and ``c`` (..., Tq, d).
"""

from __future__ import annotations

import math

import torch

from .mistaken import State, Step

_softmax = torch.softmax  # taken at import, before any student code runs
_Tensor = torch.Tensor


def _with(state: State, **values) -> State:
    return {**state, **values}


def scale(d: int, wrong: dict[str, float]) -> Step:
    """``scaled = q @ k^T / sqrt(d)``; ``wrong``: ``{verdict: what it divides by}``."""

    def by(divisor: float):
        return lambda st: _with(st, scaled=st["q"] @ st["k"].mT / divisor)

    return Step(
        right=by(math.sqrt(d)),
        wrong={verdict: by(divisor) for verdict, divisor in wrong.items()},
    )


def _blocked(st: State) -> _Tensor | None:
    """Where the mask blocks a key, as large as the scores; None if nowhere."""
    keep = st["keep"]
    if keep is None or bool(keep.all()):
        return None
    return _masked(st)


def _masked(st: State) -> _Tensor:
    """Where the mask blocks a key, as large as the scores (all False: nowhere)."""
    return (~st["keep"]).expand_as(st["scaled"])


def fill_mask(
    *,
    ignored: str | None = None,
    inverted: str | None = None,
    multiplied: str | None = None,
    added: str | None = None,
    after_softmax: str | None = None,
) -> Step:
    """``s``: the scores with blocked keys filled with -inf. Each argument is the
    verdict for one way of getting it wrong (None: not a mistake of this
    exercise); each is possible only where the mask blocks something, but an
    inverted one wherever there is a mask (it blocks every key a mask keeps)."""

    def where_blocked(way):
        return lambda st: None if _blocked(st) is None else way(st, _blocked(st))

    def where_masked(way):  # inverted, a mask that blocks nothing blocks every key
        return lambda st: None if st["keep"] is None else way(st, _masked(st))

    def right(st):
        blocked = _blocked(st)
        if blocked is None:
            return _with(st, s=st["scaled"])
        return _with(st, s=st["scaled"].masked_fill(blocked, -math.inf))

    ways = {
        ignored: lambda st, blocked: _with(st, s=st["scaled"]),
        inverted: (  # a row with nothing blocked is NaN (-inf) or even (finite),
            lambda st, blocked: _with(st, s=st["scaled"].masked_fill(~blocked, -1e9)),
            lambda st, blocked: _with(
                st, s=st["scaled"].masked_fill(~blocked, -math.inf)
            ),
            lambda st, blocked: _with(  # or, -10000 added, as it was
                st, s=st["scaled"] + (~blocked).to(st["scaled"].dtype) * -10000.0
            ),
        ),
        multiplied: lambda st, blocked: _with(st, s=st["scaled"] * ~blocked),
        added: lambda st, blocked: _with(  # the mask as it is: 1 kept, 0 blocked
            st, s=st["scaled"] + (~blocked).to(st["scaled"].dtype)
        ),
        after_softmax: lambda st, blocked: _with(
            st, s=st["scaled"], after=(~blocked).to(st["scaled"].dtype)
        ),
    }
    wrong = {}
    for verdict, way in ways.items():
        if verdict is not None:
            where = where_masked if verdict == inverted else where_blocked
            wrong[verdict] = (
                tuple(where(w) for w in way) if isinstance(way, tuple) else where(way)
            )
    return Step(right=right, wrong=wrong)


def along_queries(blocked: _Tensor) -> tuple:
    """The ways of laying a key mask along the queries, each ``st -> st`` setting
    ``s`` from ``scaled``: ``blocked`` is True (or 1) where a key is padded, laid
    where the queries run, e.g. (B, 1, Tq, 1), so that it needs Tq = Tk. A padded
    position's query row gets the dtype's lowest added to all its scores (a row of
    equal weights, its scores lost in the rounding), or is filled: with -1e9
    (equal weights) or -inf (NaN). (-10000 added changes no softmax: the numbers
    of a mask ignored, which its own verdict names.)"""
    blocked = blocked.bool()

    def lowest_added(st):
        scaled = st["scaled"]
        lowest = torch.finfo(scaled.dtype).min
        return _with(st, s=scaled + blocked.to(scaled.dtype) * lowest)

    def filled(value):
        return lambda st: _with(st, s=st["scaled"].masked_fill(blocked, value))

    return (lowest_added, filled(-1e9), filled(-math.inf))


def softmax(wrong: dict[str, int]) -> Step:
    """``p``: the softmax over the keys (dim -1), times ``after`` where a mask was
    applied after it; ``wrong``: ``{verdict: the dim taken instead}``."""

    def over(dim: int):
        def way(st):
            p = _softmax(st["s"], dim)
            after = st.get("after")
            return _with(st, p=p if after is None else p * after)

        return way

    return Step(
        right=over(-1), wrong={verdict: over(dim) for verdict, dim in wrong.items()}
    )


def weigh(
    *,
    on_keys: str | None = None,
    probs_transposed: str | None = None,
    unmasked: str | None = None,
) -> Step:
    """``c = p @ v``. The verdicts: the keys weighed instead of the values; the
    probs transposed (only where Tq == Tk); the values weighed by the unmasked
    probs (only where the mask blocks something)."""

    def transposed(st):
        return None if st["p"].shape[-2] != st["p"].shape[-1] else st["p"].mT

    def plain(st):
        return None if _blocked(st) is None else _softmax(st["scaled"], -1)

    ways = {
        on_keys: lambda st: _with(st, c=st["p"] @ st["k"]),
        probs_transposed: lambda st: (
            None if transposed(st) is None else _with(st, c=transposed(st) @ st["v"])
        ),
        unmasked: lambda st: (
            None if plain(st) is None else _with(st, c=plain(st) @ st["v"])
        ),
    }
    return Step(
        right=lambda st: _with(st, c=st["p"] @ st["v"]),
        wrong={verdict: way for verdict, way in ways.items() if verdict is not None},
    )


def merge(no_transpose: str | None = None) -> Step:
    """``c``: the heads' contexts (B, H, T, d) merged to (B, T, H * d); the verdict
    for a reshape without the transpose (only where H > 1; None: not a mistake of
    this exercise)."""

    def merged(c: _Tensor, transpose: bool) -> _Tensor:
        B, H, T, d = c.shape
        return (c.transpose(1, 2) if transpose else c).reshape(B, T, H * d)

    def unmerged(st: State) -> State | None:
        return None if st["c"].shape[1] == 1 else _with(st, c=merged(st["c"], False))

    return Step(
        right=lambda st: _with(st, c=merged(st["c"], True)),
        wrong={} if no_transpose is None else {no_transpose: unmerged},
    )
