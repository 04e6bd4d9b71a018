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
from dataclasses import asdict, dataclass
from pathlib import Path

from . import hintbook, hubhints, progress
from .graded import nbgrader_runs
from .i18n import language, sentences, tell
from .work import home

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

    On the course's hub (``COURSE_HINT_SERVICE`` set) the hub's hint service
    chooses and records it (:mod:`course.grading.hub.hintservice`): the record that
    counts where the instructor's hints cost points. It is recorded here too.
    While nbgrader runs the notebook (Validate, grading) no hint is given: a hint
    cell left in a notebook never unlocks one, nor costs one.

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
    if nbgrader_runs():  # Validate, or a grader: no request counts
        return Hint(
            exercise or "",
            tell("No hint while nbgrader runs the notebook."),
            tell("Hints come when you run the cell yourself."),
        )
    store = progress.Store(work or home(lang=language()), source=source)
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
        return unknown(exercise)
    assignment, _ = found
    mine = [e for e in store.events(assignment) if e["exercise"] == exercise]
    asked = Asked(
        exercise=exercise,
        number=number,
        mistake=_last_mistake(mine),
        failed_since=_failed_since(mine),
    )
    if os.environ.get(hubhints.SERVICE_ENV):
        shown, key = _from_service(asked)
    else:
        try:
            shown, key = choose(asked, assignment=assignment, shown=_shown(mine))
        except hintbook.Sealed:  # a hub whose hints cost points: only its service
            return Hint(
                exercise,
                tell("The hints of this class come from the course's hub."),
                tell("Ask in a notebook that runs on the hub."),
            )
    if key is not None:
        store.record(assignment, exercise, "hint", hint=key)
    return shown


def unknown(exercise: str) -> Hint:
    """What a request for an exercise that does not exist gets."""
    return Hint(
        exercise,
        tell("No exercise {exercise}.", exercise=exercise),
        tell("The exercise ids are the names you write, e.g. `softmax`."),
    )


@dataclass(frozen=True, kw_only=True)
class Asked:
    """A request for a hint: what the student's own record says about it."""

    exercise: str
    number: int | None = None  # a step hint to show again
    mistake: str | None = None  # named by the latest failed test of the exercise
    failed_since: bool = False  # a test failed after the last step hint


def choose(
    asked: Asked,
    *,
    assignment: str,
    shown: list[str],
    unlock: str | None = None,
    cost: float = 0.0,
) -> tuple[Hint, str | None]:
    """The hint to give and the key to record (``None``: nothing new unlocked).

    ``shown`` holds the keys already given (``"1"``, ``"mistake:overflow"``), in
    order; ``unlock`` is the policy (default: :func:`policy`); a ``cost`` above 0
    is said in each new hint's note (points of the exercise per hint).
    """
    exercise, mistake = asked.exercise, asked.mistake
    if asked.number is not None:
        return _again(assignment, exercise, shown, asked.number), None
    if mistake and f"mistake:{mistake}" not in shown:
        key = f"mistake:{mistake}"
        steps = len(_steps_shown(shown))
        given = Hint(
            exercise,
            tell(
                "Hint for the mistake your test named ({key})",
                key=hintbook.mistake_name(assignment, exercise, mistake),
            ),
            hintbook.mistake_hint(assignment, exercise, mistake),
            _next_note(assignment, exercise, steps),
            number=key,
        )
    else:
        given, key = _next_step(
            asked, assignment=assignment, shown=shown, unlock=unlock or policy()
        )
    if key and cost:
        note = tell("This hint costs {cost} points of the exercise.", cost=cost)
        given.note = sentences(given.note, note)
    return given, key


def _from_service(asked: Asked) -> tuple[Hint, str | None]:
    """Ask the hub's hint service, which chooses, records and may charge."""
    answer = hubhints.ask(asdict(asked))
    return Hint(**answer["hint"]), answer["key"]


def _shown(mine) -> list[str]:
    return [e["hint"] for e in mine if e["kind"] == "hint"]


def _last_mistake(mine) -> str | None:
    """The misconception the latest failed test that named one named, among the
    tests run on the answer's current code (since the answer cell last ran): a
    later test that only says how far off the numbers are does not hide it."""
    runs = [k for k, e in enumerate(mine) if e["kind"] == "run"]
    current = mine[runs[-1] :] if runs else mine
    named = [e["mistake"] for e in current if e["kind"] == "fail" and e["mistake"]]
    return named[-1] if named else None


def _failed_since(mine) -> bool:
    """Whether a test of the exercise failed after its last step hint."""
    steps = [e["time"] for e in mine if e["kind"] == "hint" and e["hint"].isdigit()]
    last = max(steps, default=float("-inf"))
    return any(e["kind"] == "fail" and e["time"] > last for e in mine)


def _steps_shown(shown: list[str]) -> list[int]:
    return sorted({int(k) for k in shown if k.isdigit()})


def _next_step(asked, *, assignment, shown, unlock) -> tuple[Hint, str | None]:
    exercise = asked.exercise
    steps = hintbook.steps(assignment, exercise)
    n = len(_steps_shown(shown)) + 1
    if n > len(steps):
        last = tell(
            "That was the last hint. Reread the ones before it and compare each step with your code."
        )
        return _step(exercise, steps, len(steps), last), None
    if n > 1 and unlock == "after-failure" and not asked.failed_since:
        wait = tell("The next hint unlocks when a test of this exercise fails again.")
        return _step(exercise, steps, n - 1, wait), None
    return _step(exercise, steps, n, _next_note(assignment, exercise, n)), str(n)


def _again(assignment, exercise, shown, number) -> Hint:
    steps = hintbook.steps(assignment, exercise)
    if number in _steps_shown(shown):
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
    left = hintbook.book()[assignment][exercise]["steps"] - n
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
