"""Wrong answers built step by step: what an answer gives when one or two of its
steps are done a known wrong way.

A check that computes a value in steps (project, scale, mask, normalise, weigh)
lists, for each step, the ways students get it wrong. :func:`mistaken` runs the
steps with every single wrong way, then with every pair of wrong ways from two
different steps, and returns the values as tiers for
:func:`~course.checks.compare.expect_close`'s ``diagnose``: one mistake first,
then two, so an answer is named by the fewest mistakes that give its numbers.
A pair's verdict is :func:`~course.checks.calls.both`: "A. Also: B.", with both
mistakes' keys. A check whose answer is a count or a set rather than a tensor
names it the same way with :func:`fewest`: the smallest sets of its known
mistakes that give every number it saw.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations, product
from typing import Any

from ..i18n import mistakes_of
from .calls import both

State = dict[str, Any]
Way = Callable[[State], State | None]


@dataclass(frozen=True)
class Step:
    """One step of a computation.

    Parameters
    ----------
    right : callable
        ``right(state) -> state``: the step done right.
    wrong : dict
        ``{verdict: way}``, or ``{verdict: (way, ...)}`` where ways of making one
        mistake differ in their numbers. A way returns the state after the step, or
        None where the mistake cannot happen on this input (e.g. no padding to
        forget).
    """

    right: Callable[[State], State]
    wrong: dict[str, Way | tuple[Way, ...]] = field(default_factory=dict)

    def ways(self) -> list[tuple[str, Way]]:
        """``[(verdict, way)]``, one entry per way of each mistake."""
        return [
            (verdict, way)
            for verdict, ways in self.wrong.items()
            for way in (ways if isinstance(ways, tuple) else (ways,))
        ]


def _run(start: State, steps: list[Step], chosen: dict[int, Way]) -> State | None:
    state = dict(start)
    for i, step in enumerate(steps):
        state = chosen[i](state) if i in chosen else step.right(state)
        if state is None:
            return None
    return state


def mistaken(
    start: State,
    steps: list[Step],
    *,
    result: Callable[[State], Any],
    most: int = 2,
    said: tuple[str, ...] = (),
) -> list[dict[str, tuple]]:
    """What an answer gives with one wrong step, then with two.

    Parameters
    ----------
    start : dict
        The values the first step reads.
    steps : list of Step
        The computation, in order.
    result : callable
        ``result(final_state)``: the value a check compares (a tensor).
    most : int
        The most wrong steps in one answer (1, 2 or 3).
    said : tuple of str
        The keys of mistakes an earlier verdict on the same answer has named
        (e.g. the probs', before the output's): a combination's verdict leaves
        them out, so that it names only what is new.

    Returns
    -------
    list of dict
        ``[{verdict: (value, ...)}, ...]``: tier ``n - 1`` holds the answers with
        ``n`` wrong steps (a verdict of several: :func:`~course.checks.calls.both`).
    """
    tiers: list[dict[str, tuple]] = []
    for n in range(1, most + 1):
        tier: dict[str, list] = {}
        for where in combinations(range(len(steps)), n):
            for chosen in product(*(steps[i].ways() for i in where)):
                state = _run(
                    start,
                    steps,
                    {i: way for i, (_, way) in zip(where, chosen, strict=True)},
                )
                if state is None:
                    continue
                key = unsaid([verdict for verdict, _ in chosen], said)
                tier.setdefault(key, []).append(result(state))
        tiers.append({key: tuple(values) for key, values in tier.items()})
    return tiers


def unsaid(verdicts: list[str], said: tuple[str, ...] = ()) -> str:
    """The verdict for an answer with all of ``verdicts``' mistakes, leaving out
    those an earlier verdict named (``said``: their keys), unless that is all."""
    new = [v for v in verdicts if not _named(v, said)] or verdicts
    return new[0] if len(new) == 1 else both(*new)


def _named(verdict: str, said: tuple[str, ...]) -> bool:
    """Whether every mistake ``verdict`` names is among the keys ``said``."""
    keys = mistakes_of(verdict)
    return bool(keys) and set(keys) <= set(said)


def fewest(
    known: Sequence[Any], fits: Callable[[tuple], bool], *, most: int | None = None
) -> list[tuple]:
    """The smallest sets of known mistakes that explain an answer.

    Parameters
    ----------
    known : sequence
        The known mistakes, in the order a verdict names them.
    fits : callable
        ``fits(chosen) -> bool``: whether an answer with the mistakes of
        ``chosen`` (a tuple, in ``known``'s order) gives the numbers seen, on every
        case the check tried.
    most : int, optional
        The most mistakes in one set (default: all of ``known``).

    Returns
    -------
    list of tuple
        Every set of one mistake that fits, else every set of two, ...; ``[]``
        where none of at most ``most`` does.
    """
    for n in range(1, (len(known) if most is None else most) + 1):
        found = [chosen for chosen in combinations(known, n) if fits(chosen)]
        if found:
            return found
    return []
