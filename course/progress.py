"""A student's progress, kept in their own folder and never sent anywhere.

Every event is one row of ``<work>/.course/progress.sqlite`` (``<work>`` is the
folder that holds the assignment folders, e.g. ``mywork/``): an answer cell run, a
test cell passed or failed (with the misconception its verdict named), a hint
shown (its exercise and number), a ``course check`` verdict. The kernel records its
own cells (:func:`watch`); the views (:func:`show` in JupyterLab, ``course
progress`` in a terminal) read the rows back, so progress survives a restart.

Time spent on an exercise is the time between one recorded cell and the next one
of the same notebook, counted up to five minutes (a longer pause is not work).
"""

from __future__ import annotations

import contextlib
import html
import math
import sqlite3
import time
from pathlib import Path

from . import hintbook
from .graded import nbgrader_runs
from .i18n import N_, language, mistakes_of, tell
from .work import RECORD, home

PAUSE = 300.0  # seconds: a longer gap between two cells counts as this
SCHEMA = """CREATE TABLE IF NOT EXISTS events (
    time REAL NOT NULL, assignment TEXT NOT NULL, exercise TEXT NOT NULL,
    kind TEXT NOT NULL, test TEXT, mistake TEXT, hint TEXT, source TEXT NOT NULL)"""
STATES = {  # a state's words, said in the course's language
    "not started": N_("not started"),
    "started": N_("started"),
    "failing": N_("failing"),
    "passing": N_("passing"),
}


class Store:
    """The events of one work folder (SQLite, created on the first write)."""

    def __init__(self, work: Path, source: str = "kernel"):
        self.path = Path(work) / RECORD / "progress.sqlite"
        self.source = source  # who records: kernel, check, cli

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=10)
        db.execute(SCHEMA)
        return db

    def record(
        self,
        assignment,
        exercise,
        kind,
        *,
        test=None,
        mistake=None,
        hint=None,
        source=None,
        at=None,
    ) -> bool:
        """Add one event (``kind``: run, pass, fail, hint); False where the folder
        cannot be written (a read-only copy, a grader's sandbox): progress is a
        convenience, never a reason for a cell to fail."""
        row = (at or time.time(), assignment, exercise, kind, test, mistake, hint)
        try:
            with contextlib.closing(self._connect()) as db, db:
                db.execute(
                    "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (*row, source or self.source),
                )
        except (OSError, sqlite3.Error):
            return False
        return True

    def events(self, assignment: str | None = None) -> list[sqlite3.Row]:
        """Every event (of one assignment), oldest first."""
        if not self.path.exists():
            return []
        with contextlib.closing(self._connect()) as db:
            db.row_factory = sqlite3.Row
            where, args = (
                ("WHERE assignment = ?", (assignment,)) if assignment else ("", ())
            )
            return db.execute(
                f"SELECT * FROM events {where} ORDER BY time, rowid", args
            ).fetchall()


# --- the kernel: each cell run of an exercise becomes an event --------------------


def on_cell(result, store: Store | None = None) -> None:
    """IPython's ``post_run_cell``: record an answer cell run or a test's verdict."""
    where = hintbook.place(getattr(result.info, "cell_id", None))
    if where is None:
        return
    assignment, exercise, role = where
    store = store or Store(home(lang=language()))
    error = result.error_before_exec or result.error_in_exec
    if role == "answer":
        store.record(assignment, exercise, "run")
    elif error is not None:
        mistake = hintbook.named_mistake(assignment, exercise, mistakes_of(error))
        store.record(
            assignment, exercise, "fail", test=result.info.cell_id, mistake=mistake
        )
        _say_below(suggestion(exercise, in_notebook=True))
    elif result.info.cell_id not in hintbook.book()[assignment][exercise]["hidden"]:
        store.record(assignment, exercise, "pass", test=result.info.cell_id)


def _say_below(sentence: str) -> None:
    """Show a sentence under the cell's output (Markdown: its `code` renders)."""
    from IPython.display import display

    display({"text/markdown": sentence, "text/plain": sentence}, raw=True)


def watch(shell=None) -> bool:
    """Record this kernel's exercise cells (once; not while nbgrader grades)."""
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    if shell is None or nbgrader_runs() or getattr(shell, "_course_watch", 0):
        return False
    shell.events.register("post_run_cell", on_cell)
    shell._course_watch = True
    return True


def suggestion(exercise: str, *, in_notebook: bool) -> str:
    """The sentence after a failed test: how to ask for a hint."""
    if in_notebook:
        return tell(
            'Stuck? Ask for a hint: `check.hint("{exercise}")`', exercise=exercise
        )
    return tell(
        'Stuck on {exercise}? Ask for a hint: `check.hint("{exercise}")` in the '
        "notebook, or `python -m course hint {exercise}`",
        exercise=exercise,
    )


def record_check(work: Path, assignment: str, scores: dict, messages: dict) -> list:
    """Record ``course check`` verdicts; return the exercises that lost points."""
    store, failing = Store(work, source="check"), []
    for exercise, entry in hintbook.book().get(assignment, {}).items():
        for test in entry["tests"]:
            if test not in scores:
                continue
            score, most = scores[test]
            if score == most:
                store.record(assignment, exercise, "pass", test=test)
                continue
            verdict = messages.get(test, "")
            mistake = hintbook.named_mistake(assignment, exercise, mistakes_of(verdict))
            store.record(assignment, exercise, "fail", test=test, mistake=mistake)
            failing += [exercise] if exercise not in failing else []
    return failing


# --- what the views show ---------------------------------------------------------


def summary(work: Path) -> list[dict]:
    """One row per exercise of the course, in course order.

    Each row: ``assignment``, ``exercise``, ``state`` (a key of :data:`STATES`),
    ``mistake`` (the named misconception of the latest failure, or None), ``hints``
    (how many shown), ``seconds`` (time spent).
    """
    events = Store(work).events()
    seconds = _time_spent(events)
    rows = []
    for assignment, exercises in hintbook.book().items():
        for exercise in exercises:
            mine = [
                e
                for e in events
                if e["exercise"] == exercise and e["assignment"] == assignment
            ]
            latest = {e["test"]: e for e in mine if e["kind"] in ("pass", "fail")}
            failed = [e for e in latest.values() if e["kind"] == "fail"]
            state = "failing" if failed else "passing" if latest else "not started"
            if state == "not started" and mine:
                state = "started"
            last_fail = max(failed, key=lambda e: e["time"]) if failed else None
            rows.append(
                {
                    "assignment": assignment,
                    "exercise": exercise,
                    "state": state,
                    "mistake": last_fail["mistake"] if last_fail else None,
                    "hints": len({e["hint"] for e in mine if e["kind"] == "hint"}),
                    "seconds": seconds.get((assignment, exercise), 0.0),
                }
            )
    return rows


def _time_spent(events) -> dict:
    spent, last = {}, {}
    for e in events:
        if e["source"] != "kernel":
            continue
        key = (e["assignment"], e["exercise"])
        if e["assignment"] in last:
            gap = min(e["time"] - last[e["assignment"]], PAUSE)
            spent[key] = spent.get(key, 0.0) + max(gap, 0.0)
        last[e["assignment"]] = e["time"]
    return spent


def _minutes(seconds: float) -> str:
    return tell("{minutes} min", minutes=math.ceil(seconds / 60)) if seconds else "–"


def _state(row: dict) -> str:
    words = tell(STATES[row["state"]])
    if row["mistake"]:
        name = hintbook.mistake_name(row["assignment"], row["exercise"], row["mistake"])
        words += " · " + tell("mistake: {key}", key=name)
    return words


HEADERS = (N_("assignment"), N_("exercise"), N_("state"), N_("hints used"), N_("time"))


def cells(row: dict) -> tuple[str, ...]:
    """A row's cells, as the views print them."""
    return (
        row["assignment"],
        row["exercise"],
        _state(row),
        str(row["hints"]),
        _minutes(row["seconds"]),
    )


def table(work: Path):
    """``course progress``: a rich table of every exercise."""
    from rich.table import Table

    colour = {"passing": "green", "failing": "red", "started": "yellow"}
    out = Table(title=tell("Your progress ({folder})", folder=Path(work).name))
    for header in HEADERS:
        out.add_column(tell(header))
    for row in summary(work):
        out.add_row(*cells(row), style=colour.get(row["state"]))
    return out


def page(work: Path) -> str:
    """The progress view as an HTML fragment (for JupyterLab)."""
    head = "".join(f"<th>{html.escape(tell(h))}</th>" for h in HEADERS)
    body = "".join(
        f'<tr class="course-{row["state"].replace(" ", "-")}" '
        f'data-exercise="{row["exercise"]}">'
        + "".join(f"<td>{html.escape(c)}</td>" for c in cells(row))
        + "</tr>"
        for row in summary(work)
    )
    title = html.escape(tell("Your progress ({folder})", folder=Path(work).name))
    return (
        f'<div class="course-progress"><style>{CSS}</style><h3>{title}</h3>'
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    )


CSS = (
    ".course-progress td,.course-progress th{padding:2px 8px;text-align:left!important}"
    ".course-passing td{color:#11772d}.course-failing td{color:#b3261e}"
    ".course-started td{color:#8a6d00}.course-not-started td{color:#777}"
)


def show(work: Path | None = None):
    """In a notebook: the progress of every assignment and exercise, as a table."""
    from IPython.display import HTML

    return HTML(page(work or home(lang=language())))
