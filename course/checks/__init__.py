"""What the notebooks' test cells call.

Every check raises :class:`CheckFailed` with a sentence written for the student: what
is wrong, and where a known misconception explains it, its name. IPython shows that
sentence alone, never a traceback into this package or the test cell.

The per-assignment modules (``config``, ``outputs``, ``heads``, ...) hold the checks
of one notebook each. Their oracles are independent of any solution: the model's own
outputs, bertviz's neuron-view model, ``torch.nn`` modules, and torch's softmax.
"""

from __future__ import annotations

import contextlib
import math
import traceback
from collections.abc import Callable, Iterable

import torch

from ..data import SAMPLE_TEXT, SENTENCE_PAIR
from ..i18n import N_, say
from . import evidence

# References taken at import, before any student code runs, so that a notebook which
# redefines ``torch.allclose`` and friends does not change how it is graded.
_Tensor = torch.Tensor
_isinstance = isinstance
_float64 = torch.float64
allclose = torch.allclose
equal = torch.equal

# Visible tests on "the sample text" also run this second one, so that an answer
# fitted to the sample (its numbers hard-coded) cannot pass them.
SAMPLE_TEXTS = (SAMPLE_TEXT, SENTENCE_PAIR[1])


class CheckFailed(AssertionError):
    """A test cell's verdict, written for the student."""

    def _render_traceback_(self):  # IPython shows this instead of a traceback
        return [f"CheckFailed: {self}"]


class ShortcutUsed(CheckFailed):
    """Raised when a check forbids a library shortcut and the answer used it."""


def fail(message: str, /, **fields) -> None:
    """Raise :class:`CheckFailed` with ``message`` in the course's language.

    ``message`` is an English catalog entry (``{field}`` templates filled from
    ``fields``) or a sentence already made by :func:`course.i18n.say`.
    """
    raise CheckFailed(say(message, **fields))


def _student_frame(tb) -> str:
    """The last frame of the traceback that lies in notebook code, as a short note."""
    frames = [
        f
        for f in traceback.extract_tb(tb)
        if "ipykernel" in f.filename or "<" in f.filename
    ]
    if not frames:
        return ""
    f = frames[-1]
    return say(
        " (in your code: `{code}`, line {lineno} of its cell)",
        code=(f.line or "").strip(),
        lineno=f.lineno,
    )


def call(
    fn: Callable,
    *args,
    name: str | None = None,
    probe: Callable | None = None,
    cache: dict | None = None,
    **kwargs,
):
    """Call a student's function, turning any crash into a readable verdict.

    Under autograde the call and its result are evidence (:mod:`.evidence`): the
    kernel records them, the grader replays them.

    Parameters
    ----------
    fn : callable
        The student's function or class.
    *args, **kwargs
        Passed on.
    name : str, optional
        How to name ``fn`` in messages (default: its ``__name__``).
    probe : callable, optional
        ``probe(result, *args)`` turns the result into plain data where it is made
        (e.g. what a matplotlib Axes shows); the check gets that data.
    cache : dict, optional
        Reuse an earlier outcome of the same call (``fn`` and inputs) kept here.
    """
    name = name or getattr(fn, "__name__", "your function")

    def run() -> list:
        key = (id(fn), evidence.digest(name, args, kwargs))
        if cache is not None and key in cache and cache[key][0] is fn:
            return cache[key][1]
        outcome = _run(fn, args, kwargs, probe)
        if cache is not None:
            cache[key] = (fn, outcome)
        return outcome

    outcome = evidence.invoke(fn, name, args, kwargs, run)
    if outcome[0] == "value":
        return outcome[1]
    _, kind, ename, evalue, where = outcome
    if kind == "type":
        fail(
            "`{name}` should be a function, but it is a {ename}.",
            name=name,
            ename=ename,
        )
    if kind == "check":
        raise CheckFailed(evalue[:1000])
    if kind == "todo":
        fail(
            "`{name}` is not written yet: it still raises NotImplementedError.",
            name=name,
        )
    hint = next((say(h) for key, h in HINTS.items() if key in evalue), "")
    fail(
        "`{name}` raised {ename}: {error}{where}{hint}",
        name=name,
        ename=ename,
        error=evalue[:500],  # torch's own words, in English
        where=where[:300],
        hint=hint,
    )


def _run(fn, args, kwargs, probe) -> list:
    """Call ``fn`` live: ``["value", result]`` or ``["raised", kind, ename, ...]``."""
    if not callable(fn):
        return ["raised", "type", type(fn).__name__, "", ""]
    try:
        value = fn(*args, **kwargs)
        return ["value", probe(value, *args) if probe else value]
    except CheckFailed as err:
        return ["raised", "check", "", str(err), ""]
    except NotImplementedError:
        return ["raised", "todo", "", "", ""]
    except Exception as err:  # noqa: BLE001 - any crash becomes feedback
        where = _student_frame(err.__traceback__)
        return ["raised", "error", type(err).__name__, str(err), where]


def given(value, name: str):
    """A value the notebook computed (e.g. one head's Q), taken as evidence."""
    return call(lambda: value, name=name)


#: Torch error fragments and what they usually mean in this course.
HINTS = {
    "view size is not compatible": N_(
        " Hint: after a transpose the tensor is not contiguous; call "
        ".contiguous() before .view, or use .reshape."
    ),
    "must match the size of tensor b": N_(
        " Hint: these shapes do not broadcast; e.g. a (B, T) mask must "
        "become (B, 1, 1, T) to be added to (B, H, T, T) scores."
    ),
    "cannot be multiplied": N_(
        " Hint: check which side needs a transpose; nn.Linear stores its "
        "weight as (out_features, in_features)."
    ),
}


def expect_tensor(x, name: str) -> _Tensor:
    """Fail unless ``x`` is a torch tensor; return it."""
    if not _isinstance(x, _Tensor):
        fail(
            "{name} should be a torch.Tensor, but it is a {type_name}.",
            name=name,
            type_name=type(x).__name__,
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
        fail(_and(sentence, hint))
    return x


def expect_finite(x: _Tensor, name: str, hint: str = "") -> None:
    """Fail if ``x`` holds NaN or inf."""
    if not bool(torch.isfinite(x).all()):
        fail(_and(say("{name} contains NaN or inf.", name=name), hint))


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


def _same_mistake(a: _Tensor, b: _Tensor, atol: float, rtol: float) -> bool:
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
    diagnose: dict[str, _Tensor | tuple[_Tensor, ...]] | None = None,
    what: str = N_("the reference"),
) -> None:
    """Fail unless ``actual`` matches ``expected`` within float32 tolerance.

    Parameters
    ----------
    actual, expected : Tensor
        Student's value and the oracle's. ``actual`` may be float32 or float64.
    name : str
        How to name the value in the message.
    diagnose : dict, optional
        ``{message: wrong_value}``: what a known misconception would have produced
        (or a tuple of values, where ways of making it differ in their numbers).
        If ``actual`` matches one of them, that message is the verdict (all of
        them, where on this input several give the same numbers).
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
    named = [
        message
        for message, wrong in (diagnose or {}).items()
        if any(
            w.shape == expected.shape and _same_mistake(actual, w, atol, rtol)
            for w in (wrong if _isinstance(wrong, tuple) else (wrong,))
        )
    ]
    if named:  # on some inputs two mistakes give the same numbers: name both
        fail("{name} is wrong: {mistakes}", name=name, mistakes=_either(named))
    expect_finite(actual, name)
    fail(
        "{name} does not match {what}: the largest difference is "
        "{max_diff:.3g} (allowed about {atol:g}).",
        name=name,
        what=what,
        max_diff=max_diff(actual, expected),
        atol=atol,
    )


def _and(sentence: str, hint: str) -> str:
    """A verdict and the hint that follows it (if any), both in the language."""
    return f"{sentence} {say(hint)}".strip() if hint else sentence


def _either(mistakes: list[str]) -> str:
    """Several misconceptions that give the same numbers, each in the language."""
    return say(" Or: ").join(say(m) for m in mistakes)


def expect_equal(actual, expected, name: str, hint: str = "") -> None:
    """Fail unless ``actual == expected`` (plain Python values)."""
    if actual != expected:
        sentence = say(
            "{name} should be {expected!r}, but it is {actual!r}.",
            name=name,
            expected=expected,
            actual=actual,
        )
        fail(_and(sentence, hint))


@contextlib.contextmanager
def forbid(targets: Iterable[tuple[object, str]], why: str):
    """Make library shortcuts raise :class:`ShortcutUsed` while the block runs.

    Parameters
    ----------
    targets : iterable of (owner, attribute)
        E.g. ``[(torch, "softmax"), (self_attn, "forward")]``.
    why : str
        The lesson, said when the shortcut is used.
    """
    saved = []

    def blocked(*_args, **_kwargs):
        raise ShortcutUsed(say(why))

    for owner, attr in targets:
        saved.append((owner, attr, owner.__dict__.get(attr, _MISSING)))
        setattr(owner, attr, blocked)
    try:
        yield
    finally:
        for owner, attr, old in reversed(saved):
            if old is _MISSING:
                delattr(owner, attr)
            else:
                setattr(owner, attr, old)


_MISSING = object()


def no_forward(*modules: torch.nn.Module, lesson: str):
    """Forbid calling each module (its ``forward``) while the block runs."""
    return forbid([(m, "forward") for m in modules], lesson)


def softmax_forbidden(lesson: str):
    """Forbid torch's softmax functions while the block runs."""
    F = torch.nn.functional
    return forbid(
        [
            (torch, "softmax"),
            (F, "softmax"),
            (_Tensor, "softmax"),
            (torch.special, "softmax"),
            (torch.nn.Softmax, "forward"),
            (F, "log_softmax"),
            (torch, "log_softmax"),
            (_Tensor, "log_softmax"),
        ],
        lesson,
    )


def random_batch(rng, vocab: int = 100, token_types: bool = False):
    """A random padded batch: ``(input_ids, token_type_ids or None, attention_mask)``.

    B in 2..3, T in 2..9; the first row is full length, the others padded (so a
    forgotten mask always shows, whatever the seed).
    """
    B, T = rng.randint(2, 3), rng.randint(2, 9)
    gen = torch.Generator().manual_seed(rng.randint(0, 999))
    ids = torch.randint(1, vocab, (B, T), generator=gen)
    types = torch.randint(0, 2, (B, T), generator=gen) if token_types else None
    lengths = [T] + [rng.randint(1, T - 1) for _ in range(B - 1)]  # some padding
    mask = torch.tensor([[1] * n + [0] * (T - n) for n in lengths])
    return ids, types, mask


def random_tiny_bert(rng, heads=(1, 2, 3, 4)):
    """A tiny BERT of random size drawn from ``rng`` (1-3 layers, head size 2-8).

    Its hidden size is at least 4: LayerNorm over 2 numbers keeps only which one is
    larger, and that would hide most mistakes made before it.
    """
    from .. import models

    seed, num_layers = rng.randint(0, 999), rng.randint(1, 3)
    num_heads = rng.choice(heads)
    return models.tiny_bert(
        seed=seed,
        num_layers=num_layers,
        num_heads=num_heads,
        head_size=rng.choice([2, 4, 8] if num_heads > 1 else [4, 8]),
    )


def score_line(passed: bool, message: str) -> None:
    """Print a one-line verdict (used by checks that pass with a remark)."""
    print(("✓ " if passed else "✗ ") + say(message))
