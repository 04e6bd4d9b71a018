"""Comparisons of a student's value with an oracle's, each failing with one
sentence: wrong type, wrong shape, NaN, a known misconception's numbers, or how
far off it is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch

from ..i18n import N_, mistakes_of, naming, say, sentences
from .calls import ALSO, CheckFailed, both, fail

# References taken at import, before any student code runs, so that a notebook which
# redefines ``torch.allclose`` and friends does not change how it is graded.
_Tensor = torch.Tensor
_isinstance = isinstance
_float64 = torch.float64
allclose = torch.allclose
equal = torch.equal


def expect_tensor(x, name: str) -> _Tensor:
    """Fail unless ``x`` is a torch tensor; return it."""
    if not _isinstance(x, _Tensor):
        fail(
            "{name} should be a torch.Tensor, but it is a {type_name}.",
            name=name,
            type_name=type(x).__name__,
        )
    return x


def expect_bool_mask(x, name: str) -> _Tensor:
    """Fail unless ``x`` is a bool tensor (a mask, True = may attend); return it."""
    x = expect_tensor(x, name)
    if x.dtype != torch.bool:
        fail(
            "{name} should be a bool tensor (True = may attend), but its dtype is "
            "{dtype}.",
            name=name,
            dtype=x.dtype,
        )
    return x


def expect_shape(x, shape: Iterable[int], name: str, hint: str = "") -> _Tensor:
    """Fail unless ``x`` is a tensor of exactly ``shape``."""
    x = expect_tensor(x, name)
    shape = tuple(shape)
    if tuple(x.shape) != shape:
        sentence = say(
            "{name} should have shape {shape}, but it has shape {got}.",
            name=name,
            shape=shape,
            got=tuple(x.shape),
        )
        fail(with_hint(sentence, hint))
    return x


def expect_finite(x: _Tensor, name: str, hint: str = "") -> None:
    """Fail if ``x`` holds NaN or inf."""
    if not bool(torch.isfinite(x).all()):
        fail(with_hint(say("{name} contains NaN or inf.", name=name), hint))


def max_diff(a: _Tensor, b: _Tensor) -> float:
    """Largest absolute difference, computed in float64."""
    a = a.detach().to(_float64)
    b = b.detach().to(_float64)
    if a.shape != b.shape:
        return math.inf
    if a.numel() == 0:
        return 0.0
    return float((a - b).abs().max())


def is_close(a: _Tensor, b: _Tensor, atol: float = 1e-4, rtol: float = 1e-4) -> bool:
    """``|a - b| <= atol + rtol * |b|`` everywhere, in float64, shapes equal."""
    a = a.detach().to(_float64)
    b = b.detach().to(_float64)
    if a.shape != b.shape:
        return False
    return bool(((a - b).abs() <= atol + rtol * b.abs()).all())


def same_mistake(a: _Tensor, b: _Tensor, atol: float, rtol: float) -> bool:
    """Close where both are finite, NaN/inf at the same places (a mistake's values)."""
    a, b = a.detach().to(_float64), b.detach().to(_float64)
    bad_a, bad_b = ~torch.isfinite(a), ~torch.isfinite(b)
    if not bool((bad_a == bad_b).all()):
        return False
    return is_close(a[~bad_a], b[~bad_b], atol, rtol)


def expect_close(
    actual,
    expected: _Tensor,
    name: str,
    *,
    atol: float = 1e-4,
    rtol: float = 1e-4,
    diagnose: dict | list[dict] | Callable[[], dict | list[dict]] | None = None,
    what: str = N_("the reference"),
) -> None:
    """Fail unless ``actual`` matches ``expected`` within float32 tolerance.

    Parameters
    ----------
    actual, expected : Tensor
        Student's value and the oracle's. ``actual`` may be float32 or float64.
    name : str
        How to name the value in the message.
    diagnose : dict or list of dict, optional
        ``{message: wrong_value}``: what a known misconception would have produced
        (or a tuple of values, where ways of making it differ in their numbers).
        If ``actual`` matches one of them, that message is the verdict (all of
        them, where on this input several give the same numbers). A list is tried
        in order (e.g. :func:`~course.checks.mistaken.mistaken`'s tiers: one
        mistake, then two), and the first dict with a match gives the verdict. A
        callable returning either is called only when ``actual`` is wrong.
    what : str
        What ``expected`` comes from, e.g. "the model's attentions".
    """
    actual = expect_shape(actual, expected.shape, name)
    if actual.is_complex() or not (actual.is_floating_point()):
        fail(
            "{name} should hold floats, but its dtype is {dtype}.",
            name=name,
            dtype=actual.dtype,
        )
    if is_close(actual, expected, atol, rtol):
        return
    if callable(diagnose):  # built only for an answer that is wrong
        diagnose = diagnose()
    tiers = diagnose if _isinstance(diagnose, list) else [diagnose or {}]
    for tier in tiers:  # the fewest mistakes that give these numbers
        named = [
            message
            for message, wrong in tier.items()
            if any(
                w.shape == expected.shape and same_mistake(actual, w, atol, rtol)
                for w in (wrong if _isinstance(wrong, tuple) else (wrong,))
            )
        ]
        if named:  # on some inputs two mistakes give the same numbers: name both
            fail_mistaken(name, *named)
    expect_finite(actual, name)
    fail(
        "{name} does not match {what}: the largest difference is "
        "{max_diff:.3g} (allowed about {atol:g}).",
        name=name,
        what=what,
        max_diff=max_diff(actual, expected),
        atol=atol,
    )


def with_hint(sentence: str, hint: str) -> str:
    """A verdict and the hint that follows it (if any), both in the language."""
    if not hint:
        return sentence
    return naming(sentences(sentence, say(hint).strip()), sentence, hint)


def either(mistakes: list[str]) -> str:
    """Several misconceptions that give the same numbers, each in the language.
    Pairs that share their first mistake say it once: "X. Also: Y. Or: Z", not
    "X. Also: Y. Or: X. Also: Z"."""
    said = [say(m) for m in mistakes]
    also = say(ALSO, verdict="")  # what :func:`calls.both` puts before a second
    firsts = {text.partition(also)[0] for text in said}
    if len(said) > 1 and len(firsts) == 1 and all(also in text for text in said):
        seconds = [text.partition(also)[2] for text in said]
        return naming(firsts.pop() + also + say(" Or: ").join(seconds), *mistakes)
    return naming(say(" Or: ").join(said), *mistakes)


def fail_laid_out(
    layout: str, back: _Tensor, want: _Tensor, diagnose: dict, *, off: str, **fields
) -> None:
    """Fail naming a wrong layout, and what else the numbers show once laid right.

    Parameters
    ----------
    layout : str
        The verdict on the layout (a shape the contract does not allow, e.g.
        (B, H, d, T)), in the language.
    back : Tensor
        The answer laid out as the contract asks again (e.g. T and d swapped back).
    want : Tensor
        The right value, laid out that way.
    diagnose : dict
        ``{verdict: value}`` of known mistakes, laid out that way too: any that
        ``back`` matches is named beside the layout ("Also:").
    off : str
        Catalog sentence for numbers that match none, with ``{max_diff}`` and any
        of ``fields``.
    """
    if is_close(back, want):
        fail(layout)
    named = [
        mistake
        for mistake, wrong in diagnose.items()
        if wrong.shape == back.shape and same_mistake(back, wrong, 1e-4, 1e-4)
    ]
    if named:
        fail(both(layout, either(named)))
    fail(both(layout, say(off, max_diff=max_diff(back, want), **fields)))


def fail_mistaken(name: str, *mistakes: str) -> None:
    """Fail with the verdict that names the known misconceptions ``name`` shows.

    Parameters
    ----------
    name : str
        How to name the student's value in the message.
    *mistakes : str
        Catalog sentences, one per misconception; several where, on this input,
        they give the same numbers (joined with "Or:").
    """
    err = CheckFailed(
        say("{name} is wrong: {mistakes}", name=name, mistakes=either(list(mistakes)))
    )
    if len(mistakes) > 1:  # each alone would explain these numbers
        err.alternatives = tuple(mistakes_of(m) for m in mistakes)
    raise err


def expect_equal(actual, expected, name: str, hint: str = "") -> None:
    """Fail unless ``actual == expected`` (plain Python values)."""
    if actual != expected:
        sentence = say(
            "{name} should be {expected!r}, but it is {actual!r}.",
            name=name,
            expected=expected,
            actual=actual,
        )
        fail(with_hint(sentence, hint))
