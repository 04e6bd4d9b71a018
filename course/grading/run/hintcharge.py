"""Hints that cost points: ``course grade`` reads who asked which hint from the
course hub's hint service, charges what the instructor's policy says into the
gradebook, and writes ``reports/hints.csv`` for the class report.

The record is the service's (:mod:`course.grading.hub.hintservice`), never the
student's own progress file: editing files in one's home changes no grade.

A charge is the grade cells' *extra credit*, negative, where formgrader shows it:
for an exercise, what its hints cost when each was given (the record keeps it),
counting those asked before the graded submission was made,
taken from its test cells in order, never more than the exercise scored.
Charging again sets the same values: it adds nothing. A cell whose extra credit
an instructor set to zero or more (a waiver, a bonus) is left as it is.
"""

from __future__ import annotations

import csv
import json
import os
import urllib.parse
from datetime import UTC
from pathlib import Path

from ... import hintbook
from ...hubhints import TOKEN_ENV, call_service
from ..gradebook import tools_on_path
from ..settings import HintPolicy, hint_policy

FILE = "hints.csv"  # in reports/: student, assignment, exercise, hints, charged

Key = tuple[str, str, str]  # (student, assignment, exercise)


class Unreadable(Exception):
    """The hint service's record could not be read."""


def read(policy: HintPolicy, assignments: list[str], *, token: str = "") -> list:
    """Every hint given on ``assignments`` (dicts: time, student, assignment,
    exercise, hint, cost), from the service whose socket ``policy.record`` names,
    asked with ``token`` (default: ``JUPYTERHUB_API_TOKEN``, an instructor's)."""
    token = token or os.environ.get(TOKEN_ENV, "")
    rows = []
    for assignment in assignments:
        route = "record?" + urllib.parse.urlencode({"assignment": assignment})
        try:
            status, body = call_service(policy.record, "GET", route, token=token)
            if status != 200:
                raise ValueError(f"HTTP {status}")
            rows += json.loads(body)["rows"]
        except (OSError, ValueError, KeyError) as error:
            raise Unreadable(f"{policy.record}: {error}") from None
    return rows


def tally(rows: list, *, until: dict | None = None) -> dict:
    """``{(student, assignment, exercise): (hints, cost)}``; with ``until``
    (``{(student, assignment): epoch seconds}``), only the hints asked by then."""
    out: dict[Key, tuple[int, float]] = {}
    for r in rows:
        limit = (until or {}).get((r["student"], r["assignment"]))
        if limit is not None and r["time"] > limit:
            continue
        key = (r["student"], r["assignment"], r["exercise"])
        hints, cost = out.get(key, (0, 0.0))
        out[key] = (hints + 1, cost + float(r["cost"]))
    return out


def _submitted_at(gb, student: str, assignment: str) -> float | None:
    """When the graded submission was made (epoch seconds; None: not known)."""
    from nbgrader.api import MissingEntry

    try:
        stamp = gb.find_submission(assignment, student).timestamp
    except MissingEntry:
        return None
    if stamp is None:
        return None
    return stamp.replace(tzinfo=stamp.tzinfo or UTC).timestamp()


def charge(*, db_url: str, rows: list) -> dict:
    """Charge the hints of ``rows`` into the gradebook at ``db_url``: those asked
    before the graded submission was made (a hint asked later cannot have helped
    it), each at its price then. Returns ``{key: points charged}`` (what the
    exercise's score allowed)."""
    from nbgrader.api import Gradebook, MissingEntry

    charged = {}
    with tools_on_path(), Gradebook(db_url) as gb:
        pairs = {(r["student"], r["assignment"]) for r in rows}
        until = {pair: _submitted_at(gb, *pair) for pair in pairs}
        for (student, assignment, exercise), (_, cost) in sorted(
            tally(rows, until=until).items()
        ):
            tests = hintbook.book().get(assignment, {}).get(exercise, {}).get("tests")
            grades = []
            for test in tests or []:
                try:
                    grade = gb.find_grade(test, assignment, assignment, student)
                except MissingEntry:  # not submitted, or not graded
                    continue
                if grade.extra_credit is None or grade.extra_credit < 0:
                    grades.append(grade)  # not the instructor's own
            left, total = cost, 0.0
            for grade in grades:
                base = grade.manual_score
                base = grade.auto_score if base is None else base
                take = min(left, base or 0.0)
                grade.extra_credit = -take if take else None
                left -= take
                total += take
            if grades:
                charged[(student, assignment, exercise)] = total
        gb.db.commit()
    return charged


def write(out: Path, counts: dict, charged: dict, *, assignments: list[str]) -> Path:
    """``out/hints.csv`` (the instructor's alone, 0600): one row per student and
    exercise with hints; the rows of ``assignments`` are replaced, those of any
    other assignment (settled by an earlier run) kept."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / FILE
    kept = []
    if path.is_file():
        with path.open(newline="") as f:
            kept = [r for r in csv.DictReader(f) if r["assignment"] not in assignments]
    header = ["student", "assignment", "exercise", "hints", "charged"]
    descriptor = os.open(path, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
    with open(descriptor, "w", newline="") as f:
        rows = csv.writer(f)
        rows.writerow(header)
        rows.writerows([r[h] for h in header] for r in kept)
        for key, (n, _) in sorted(counts.items()):
            rows.writerow([*key, n, f"{charged.get(key, 0.0):g}"])
    return path


def settle(*, root: Path, assignments: list[str], db_url: str) -> tuple[int, str]:
    """After grading: read the record, charge it, write ``reports/hints.csv``, as
    the policy in ``root``'s ``nbgrader_config.py`` says. Returns an exit status
    (1: hints cost points and their record could not be read) and what to print.
    """
    policy = hint_policy(root)
    if not policy.record:
        if policy.points_per_hint:
            return 1, (
                "hints cost points, but c.HintPolicy.record names no hint service: "
                "no hint was charged"
            )
        return 0, ""
    try:
        rows = read(policy, assignments)
    except Unreadable as error:
        return 1, f"no hint was charged: the hint record could not be read ({error})"
    charged = charge(db_url=db_url, rows=rows)
    path = write(root / "reports", tally(rows), charged, assignments=assignments)
    asked = len(rows)
    return 0, f"hints: {asked} asked, {sum(charged.values()):g} points charged: {path}"
