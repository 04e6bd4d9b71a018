"""Asking for a hint: ``check.hint("softmax")`` in a notebook, ``course hint``.

Each call gives the next hint of the exercise and records it (:mod:`.progress`).
Where the latest failed test of the exercise named a misconception, the hint
written for that misconception comes first; then the steps, from the idea to the
shape of the code. ``COURSE_HINTS`` says when the next step unlocks:
``on-request`` (the default: at every call) or ``after-failure`` (only once a test
of the exercise has failed since the last hint).

Importing this module in a kernel starts recording its exercise cells
(:func:`course.progress.watch`).
"""

from __future__ import annotations

import html
import os
import re
from dataclasses import dataclass
from pathlib import Path

from . import hintbook, progress
from .i18n import tell

ENV = "COURSE_HINTS"
POLICIES = ("on-request", "after-failure")


def policy() -> str:
    """When the next step hint unlocks: ``on-request`` or ``after-failure``."""
    value = os.environ.get(ENV, "on-request").strip().lower()
    return value if value in POLICIES else "on-request"


@dataclass
class Hint:
    """One hint as the student sees it (HTML in a notebook, text in a terminal)."""

    exercise: str
    title: str
    text: str
    note: str = ""
    number: str = ""

    def __str__(self) -> str:
        return "\n".join(filter(None, [self.title, self.text, self.note]))

    __repr__ = __str__

    def _repr_html_(self) -> str:
        def md(s: str) -> str:  # `code` spans; everything else as text
            return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(s))

        note = f'<p class="course-hint-note">{md(self.note)}</p>' if self.note else ""
        return (
            f'<div class="course-hint" data-exercise="{html.escape(self.exercise)}" '
            f'data-hint="{html.escape(self.number)}" style="border-left:4px solid '
            '#d9a400;padding:4px 12px;background:#fffbea">'
            f"<strong>{html.escape(self.title)}</strong><p>{md(self.text)}</p>"
            f"{note}</div>"
        )


def hint(
    exercise: str | None = None,
    number: int | None = None,
    *,
    work=None,
    source="kernel",
) -> Hint:
    """The next hint for ``exercise`` (default: the one whose test failed last).

    Parameters
    ----------
    exercise : str, optional
        An exercise id, e.g. ``"softmax"``.
    number : int, optional
        Show step hint ``number`` again (one already unlocked).
    work : path, optional
        The work folder (default: found from the notebook's folder).
    source : str
        Who asks, as recorded: ``kernel`` (a notebook) or ``cli``.
    """
    store = progress.Store(progress.work_folder(work), source=source)
    if exercise is None:
        failed = [e for e in store.events() if e["kind"] == "fail"]
        if not failed:
            return Hint(
                "",
                tell("Which exercise?"),
                tell('Name it, e.g. `check.hint("softmax")`.'),
            )
        exercise = failed[-1]["exercise"]
    found = hintbook.find(exercise)
    if found is None:
        return Hint(
            exercise,
            tell("No exercise {exercise}.", exercise=exercise),
            tell("The exercise ids are the names you write, e.g. `softmax`."),
        )
    assignment, _ = found
    events = store.events(assignment)
    mine = [e for e in events if e["exercise"] == exercise]
    if number is not None:
        return _again(assignment, exercise, mine, number)
    shown = {e["hint"] for e in mine if e["kind"] == "hint"}
    fails = [e for e in mine if e["kind"] == "fail"]
    mistake = fails[-1]["mistake"] if fails else None
    if mistake and f"mistake:{mistake}" not in shown:
        store.record(assignment, exercise, "hint", hint=f"mistake:{mistake}")
        return Hint(
            exercise,
            tell("Hint for the mistake your test named ({key})", key=mistake),
            hintbook.mistake_hint(assignment, exercise, mistake),
            _next_note(assignment, exercise, len(_steps_shown(mine))),
            number=f"mistake:{mistake}",
        )
    return _next_step(store, assignment, exercise, mine)


def _steps_shown(mine) -> list[int]:
    return sorted(
        {int(e["hint"]) for e in mine if e["kind"] == "hint" and e["hint"].isdigit()}
    )


def _next_step(store, assignment, exercise, mine) -> Hint:
    steps = hintbook.steps(assignment, exercise)
    shown = _steps_shown(mine)
    n = len(shown) + 1
    if n > len(steps):
        return _step(
            exercise,
            steps,
            len(steps),
            tell(
                "That was the last hint. Reread the ones before it and compare each step with your code."
            ),
        )
    if n > 1 and policy() == "after-failure":
        last = max(
            e["time"] for e in mine if e["kind"] == "hint" and e["hint"] == str(n - 1)
        )
        if not any(e["kind"] == "fail" and e["time"] > last for e in mine):
            return _step(
                exercise,
                steps,
                n - 1,
                tell("The next hint unlocks when a test of this exercise fails again."),
            )
    store.record(assignment, exercise, "hint", hint=str(n))
    return _step(exercise, steps, n, _next_note(assignment, exercise, n))


def _again(assignment, exercise, mine, number) -> Hint:
    steps = hintbook.steps(assignment, exercise)
    if number in _steps_shown(mine):
        return _step(exercise, steps, number)
    return Hint(
        exercise,
        tell("Hint {n} is not unlocked yet.", n=number),
        tell('Ask for the next one: `check.hint("{exercise}")`.', exercise=exercise),
    )


def _step(exercise, steps, n, note="") -> Hint:
    title = tell("Hint {n} of {of} · {exercise}", n=n, of=len(steps), exercise=exercise)
    return Hint(exercise, title, steps[n - 1], note, number=str(n))


def _next_note(assignment, exercise, n) -> str:
    left = len(hintbook.book()[assignment][exercise]["steps"]) - n
    if left <= 0:
        return ""
    return tell(
        '{left} more: `check.hint("{exercise}")` again.', left=left, exercise=exercise
    )


def cli_hint(exercise: str, work: Path) -> int:
    """``course hint EXERCISE``: print the next hint (exit 2 if there is none)."""
    shown = hint(exercise, work=work, source="cli")
    print(shown)
    return 0 if shown.number else 2


progress.watch()
