"""Worked answers, for a student studying alone, once they have tried.

For each exercise (an answer cell) the worked answer is the course's own solution
and what its tests check, with their points; for each written answer (a task
cell) the model answer and its point-by-point rubric. ``course release`` writes
them into the package, one file per edition (``course/data/selfcheck/worked.json``,
``zh/worked.json``), each text *sealed*: compressed and scrambled with a key made
from its name, so that no glance, search or ``grep`` of the package shows an
answer. That is the course keeping its word, not a lock: anyone who wants to can
unseal them, as anyone can find answers on the web.

:func:`worked` opens one only after the student's own attempt exists:

* an exercise: its tests pass in the student's record (the kernel's, or ``course
  check``'s), or every step hint of it has been shown;
* a written answer: the student's cell below the question holds an answer.

Never while nbgrader runs a notebook (Validate, autograde): a graded kernel gets
nothing. On a course hub the files are the instructor's (sealed by the hub as it
starts, :mod:`course.grading.hub.private`) unless ``c.HintPolicy.worked_answers``
says otherwise.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import zlib
from dataclasses import dataclass
from pathlib import Path

from . import hintbook, progress
from .graded import nbgrader_runs
from .i18n import N_, language, tell
from .work import home

HERE = Path(__file__).resolve().parent / "data" / "selfcheck"
STUB = "YOUR ANSWER HERE"  # the release's text in a written answer's cell
#: An exercise's worked answer: its solution, then its tests, with these words.
TESTS_HEADING = N_("What its tests check [points]:")
HIDDEN = N_("(hidden)")


def path(lang: str) -> Path:
    """The worked answers of one edition."""
    return HERE / ("worked.json" if lang == "en" else f"{lang}/worked.json")


def _stream(name: str, size: int) -> bytes:
    out, counter = b"", 0
    while len(out) < size:
        out += hashlib.sha256(f"{name}:{counter}".encode()).digest()
        counter += 1
    return out[:size]


def seal(name: str, text: str) -> str:
    """``text`` compressed and scrambled with the key ``name`` (base64)."""
    data = zlib.compress(text.encode("utf-8"), 9)
    mixed = bytes(a ^ b for a, b in zip(data, _stream(name, len(data)), strict=True))
    return base64.b64encode(mixed).decode("ascii")


def unseal(name: str, sealed: str) -> str:
    """What :func:`seal` sealed."""
    data = base64.b64decode(sealed)
    plain = bytes(a ^ b for a, b in zip(data, _stream(name, len(data)), strict=True))
    return zlib.decompress(plain).decode("utf-8")


def _answers(lang: str) -> dict:
    return json.loads(path(lang).read_text("utf-8"))


@dataclass
class Worked:
    """A worked answer (or why it is not shown yet), as a notebook shows it."""

    item: str
    title: str
    text: str
    shown: bool

    def __str__(self) -> str:
        return f"{self.title}\n{self.text}"

    def _repr_html_(self) -> str:
        state = "shown" if self.shown else "locked"
        body = html.escape(self.text)
        return (
            f'<div class="course-worked" data-item="{html.escape(self.item)}" '
            f'data-state="{state}"><b>{html.escape(self.title)}</b>'
            f'<pre style="white-space: pre-wrap">{body}</pre></div>'
        )


def _written(work: Path, assignment: str, item: str) -> bool:
    """Whether the student's notebook holds an answer below task ``item``."""
    notebook = work / assignment / f"{assignment}.ipynb"
    try:
        cells = json.loads(notebook.read_text("utf-8"))["cells"]
    except (OSError, ValueError, KeyError):
        return False
    ids = [c.get("id") for c in cells]
    if item not in ids or ids.index(item) + 1 >= len(cells):
        return False
    answer = "".join(cells[ids.index(item) + 1].get("source", "")).strip()
    return bool(answer) and answer != STUB


def _tried(work: Path, assignment: str, item: str) -> bool:
    """Whether exercise ``item`` passes in the record, or every step was shown."""
    row = next(r for r in progress.summary(work) if r["exercise"] == item)
    steps = {
        e["hint"]
        for e in progress.Store(work).events(assignment)
        if e["exercise"] == item and e["kind"] == "hint" and e["hint"].isdigit()
    }
    return (
        row["state"] == "passing"
        or len(steps) >= (hintbook.book()[assignment][item]["steps"])
    )


def worked(item: str, *, work: Path | None = None, lang: str | None = None) -> Worked:
    """The worked answer of exercise or written answer ``item`` (its id, e.g.
    ``softmax`` or ``why_out_in``), once the student has tried it.

    Parameters
    ----------
    item : str
        An answer cell's id (an exercise) or a task cell's (a written answer).
    work : path, optional
        The student's work folder (default: :func:`course.work.home`).
    lang : str, optional
        The edition (default: the course's language).

    Returns
    -------
    Worked
        Shown, or with the sentence that says what to do first.
    """
    lang = language(lang)
    if nbgrader_runs():
        return Worked(item, tell("No worked answer while nbgrader runs."), "", False)
    try:
        answers = _answers(lang)
    except PermissionError:
        return Worked(
            item,
            tell("The worked answers of this class are the instructor's to give."),
            tell("Ask your instructor."),
            False,
        )
    where = [a for a, items in answers.items() if item in items]
    if not where:
        known = ", ".join(i for items in answers.values() for i in items)
        return Worked(
            item, tell("No worked answer for {item}.", item=item), known, False
        )
    assignment, entry = where[0], answers[where[0]][item]
    work = Path(work) if work else home(lang=lang)
    if entry["kind"] == "written":
        ready = _written(work, assignment, item)
        first = tell("Write your own answer in the cell below the question first.")
    else:
        ready = _tried(work, assignment, item)
        first = tell(
            "Make its tests pass first (run them, or `course check`), or ask for "
            'every hint: `check.hint("{item}")`.',
            item=item,
        )
    if not ready:
        return Worked(item, tell("Not yet: {item}", item=item), first, False)
    title = tell("Worked answer: {item}", item=item)
    return Worked(item, title, unseal(f"{assignment}/{item}", entry["sealed"]), True)


def cli_worked(item: str, work: Path) -> int:
    """``course answer ITEM``: print the worked answer (exit 2 if not shown)."""
    shown = worked(item, work=work)
    print(shown)
    return 0 if shown.shown else 2
