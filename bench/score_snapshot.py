"""Snapshot: every score and verdict ``course grade`` gives a class of fixture students.

Builds a class in a fresh course folder from the fixtures (``tests/fixtures``: the
reference answers, the correct alternatives and each misconception mutant of each
assignment, one student per mutant named for it, :func:`harness.mutant_students`), grades it with ``course
grade --fixed-seeds`` (the hidden tests' seeds of ``source/``, so two runs are
comparable) and writes, as JSON, each submission's status and reasons and each of
its cells' score, maximum and verdict message. Two snapshots, taken before and
after a change to the grading pipeline, are compared with ``--diff``.

    .venv/bin/python bench/score_snapshot.py --out before.json            # all
    .venv/bin/python bench/score_snapshot.py --out after.json 01_config 02_tokens
    .venv/bin/python bench/score_snapshot.py --diff before.json after.json

``--reports DIR`` also writes the class report (``course report``) and keeps the
run's ``reports/`` (the class report, the grading log) in DIR, to compare two runs'
reports.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from harness import mutant_students  # noqa: E402

from course import grading  # noqa: E402


def make_class(root: Path, assignments: list[str]) -> None:
    """A course folder with every fixture student's submission of each assignment."""
    grading.make_course(root)
    grading.release(assignments, root)
    for a in assignments:
        for student, (nb, _) in mutant_students(root, a).items():
            path = grading.notebook_path(root, "submitted", a, student=student)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(nb))


def snapshot(root: Path, assignments: list[str]) -> dict:
    """``{assignment: {student: {status, reasons, cells: {id: [score, max, msg]}}}}``."""
    with open(root / "reports" / "grading.csv") as f:
        states = {(r["assignment"], r["student"]): r for r in csv.DictReader(f)}
    out: dict = {}
    for a in assignments:
        scores = grading.cell_scores(root, a)
        for (assignment, student), row in sorted(states.items()):
            if assignment != a:
                continue
            path = grading.notebook_path(root, "autograded", a, student=student)
            messages = grading.cell_messages(path) if path.exists() else {}
            cells = {
                cell: [score, most, messages.get(cell, "")]
                for cell, (score, most) in sorted(scores.get(student, {}).items())
            }
            out.setdefault(a, {})[student] = {
                "status": row["status"],
                "reasons": row["reasons"],
                "cells": cells,
            }
    return out


def diff(before: dict, after: dict) -> list[str]:
    """One line per (assignment, student, field) that differs."""
    lines = []
    for a in sorted(set(before) | set(after)):
        old, new = before.get(a, {}), after.get(a, {})
        for s in sorted(set(old) | set(new)):
            x, y = old.get(s, {}), new.get(s, {})
            for key in ("status", "reasons"):
                if x.get(key) != y.get(key):
                    lines.append(f"{a}/{s} {key}: {x.get(key)!r} -> {y.get(key)!r}")
            xc, yc = x.get("cells", {}), y.get("cells", {})
            for c in sorted(set(xc) | set(yc)):
                if xc.get(c) != yc.get(c):
                    lines.append(f"{a}/{s}/{c}: {xc.get(c)!r} -> {yc.get(c)!r}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("assignments", nargs="*", help="default: all")
    p.add_argument("--out", type=Path, help="the snapshot's JSON file")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--diff", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    p.add_argument("--reports", type=Path, help="keep the run's reports/ here")
    args = p.parse_args(argv)
    if args.diff:
        lines = diff(*(json.loads(path.read_text()) for path in args.diff))
        print("\n".join(lines) or "identical")
        return 1 if lines else 0
    names = args.assignments or grading.assignments()
    with tempfile.TemporaryDirectory(prefix="course-snapshot-") as tmp:
        root = Path(tmp)
        make_class(root, names)
        start = time.perf_counter()
        cmd = [sys.executable, "-m", "course", "grade", *names, f"--root={root}",
               f"--workers={args.workers}", "--fixed-seeds"]  # fmt: skip
        subprocess.run(cmd, check=False)
        print(f"graded in {time.perf_counter() - start:.0f} s", file=sys.stderr)
        data = snapshot(root, names)
        if args.reports:
            report = [sys.executable, "-m", "course", "report", *names]
            subprocess.run([*report, f"--root={root}"], check=False)
            shutil.copytree(root / "reports", args.reports, dirs_exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
