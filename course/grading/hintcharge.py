"""Hints that cost points: ``course grade`` reads who asked which hint from the
course hub's hint service, charges what the instructor's policy says into the
gradebook, and writes ``reports/hints.csv`` for the class report.

The record is the service's (:mod:`course.grading.hintservice`), never the
student's own progress file: editing files in one's home changes no grade.

A charge is the grade cells' *extra credit*, negative, where formgrader shows it
(and an instructor may change it): for an exercise with ``n`` hints,
``n * points_per_hint`` points, taken from its test cells in order, never more
than the exercise scored. Charging again sets the same values: it adds nothing.
"""

from __future__ import annotations

import csv
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from pathlib import Path

from .. import hintbook
from .gradebook import tools_on_path
from .hintservice import NAME
from .settings import HintPolicy

FILE = "hints.csv"  # in reports/: student, assignment, exercise, hints, charged
TOKEN_ENV = "JUPYTERHUB_API_TOKEN"  # the instructor's, in their hub server

Key = tuple[str, str, str]  # (student, assignment, exercise)


class Unreadable(Exception):
    """The hint service's record could not be read."""


def read(policy: HintPolicy, assignments: list[str], *, token: str = "") -> Counter:
    """``Counter({(student, assignment, exercise): hints})`` from the service that
    ``policy.record`` names, asked with ``token`` (default: ``JUPYTERHUB_API_TOKEN``,
    an instructor's)."""
    token = token or os.environ.get(TOKEN_ENV, "")
    counts: Counter = Counter()
    for assignment in assignments:
        query = urllib.parse.urlencode({"assignment": assignment})
        url = f"{policy.record.rstrip('/')}/services/{NAME}/api/record?{query}"
        request = urllib.request.Request(
            url, headers={"Authorization": f"token {token}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                rows = json.loads(response.read())["rows"]
        except (OSError, ValueError, KeyError) as error:
            raise Unreadable(f"{url}: {error}") from None
        counts.update((r["student"], r["assignment"], r["exercise"]) for r in rows)
    return counts


def charge(*, db_url: str, counts: Counter, points_per_hint: float) -> dict:
    """Charge the hints into the gradebook at ``db_url``; return ``{key: points
    charged}`` (what the exercise's score allowed)."""
    from nbgrader.api import Gradebook, MissingEntry

    charged = {}
    with tools_on_path(), Gradebook(db_url) as gb:
        for (student, assignment, exercise), n in sorted(counts.items()):
            tests = hintbook.book().get(assignment, {}).get(exercise, {}).get("tests")
            left = n * points_per_hint
            grades = []
            for test in tests or []:
                try:
                    grades.append(gb.find_grade(test, assignment, assignment, student))
                except MissingEntry:  # not submitted, or not graded
                    continue
            total = 0.0
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


def write(out: Path, counts: Counter, charged: dict) -> Path:
    """``out/hints.csv``: one row per student and exercise with hints."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / FILE
    with open(path, "w", newline="") as f:
        rows = csv.writer(f)
        rows.writerow(["student", "assignment", "exercise", "hints", "charged"])
        for key, n in sorted(counts.items()):
            rows.writerow([*key, n, f"{charged.get(key, 0.0):g}"])
    return path


def by_exercise(out: Path, assignment: str) -> dict[str, tuple[int, int, float]]:
    """``{exercise: (hints, students, points charged)}`` of one assignment, from
    ``out/hints.csv`` (empty without one)."""
    try:
        with open(out / FILE, newline="") as f:
            rows = [r for r in csv.DictReader(f) if r["assignment"] == assignment]
    except (OSError, KeyError):
        return {}
    found: dict[str, tuple[int, int, float]] = {}
    for r in rows:
        hints, students, points = found.get(r["exercise"], (0, 0, 0.0))
        found[r["exercise"]] = (
            hints + int(r["hints"]),
            students + 1,
            points + float(r["charged"]),
        )
    return found


def settle(*, root: Path, assignments: list[str], db_url: str) -> tuple[int, str]:
    """After grading: read the record, charge it, write ``reports/hints.csv``, as
    the policy in ``root``'s ``nbgrader_config.py`` says. Returns an exit status
    (1: hints cost points and their record could not be read) and what to print.
    """
    from .settings import hint_policy

    policy = hint_policy(root)
    if not policy.record:
        if policy.points_per_hint:
            return 1, (
                "hints cost points, but c.HintPolicy.record names no hint service: "
                "no hint was charged"
            )
        return 0, ""
    try:
        counts = read(policy, assignments)
    except Unreadable as error:
        return 1, f"no hint was charged: the hint record could not be read ({error})"
    charged = {}
    if policy.points_per_hint:
        charged = charge(
            db_url=db_url, counts=counts, points_per_hint=policy.points_per_hint
        )
    path = write(root / "reports", counts, charged)
    return 0, (
        f"hints: {sum(counts.values())} asked, {sum(charged.values()):g} points "
        f"charged ({policy.points_per_hint:g} a hint): {path}"
    )
