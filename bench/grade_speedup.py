"""Benchmark: ``python -m course grade`` (parallel) vs plain serial ``nbgrader autograde``.

Builds a class of fixture students (the reference solution of each assignment),
grades it both ways in separate course folders, checks that the scores agree, and
prints the speedup as a ratio. Timing belongs here, not in the tests. The baseline
runs nbgrader's stock autograde steps, serially, one ``nbgrader autograde`` per
assignment; ``course grade`` runs the course's steps (kernels killed at once when
done) in parallel shards.

    .venv/bin/python bench/grade_speedup.py --students 20            # all assignments
    .venv/bin/python bench/grade_speedup.py --students 6 01_config    # a quick run
    .venv/bin/python bench/grade_speedup.py --students 4 --no-baseline  # course grade only
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from harness import fill, reference_answers  # noqa: E402

from course import grading  # noqa: E402

# The baseline is nbgrader as it ships: its own Execute and autograde steps.
STOCK = """
c.Autograde.autograde_preprocessors = [
    "nbgrader.preprocessors.Execute",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]
"""


def make_class(root: Path, assignments: list[str], students: int) -> None:
    grading.make_course(root)
    grading.release(assignments, root)
    for a in assignments:
        nb = fill(
            json.loads(grading.notebook_path(root, "release", a).read_text()),
            reference_answers(root, a),
        )
        for i in range(students):
            path = grading.notebook_path(root, "submitted", a, f"s{i:03d}")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(nb))


def totals(root: Path, assignments: list[str]) -> dict:
    out = {}
    for a in assignments:
        for s, cells in grading.cell_scores(root, a).items():
            out[(a, s)] = sum(
                v[0] or 0 for c, v in cells.items() if c.startswith("test_")
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("assignments", nargs="*")
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument(
        "--no-baseline",
        action="store_true",
        help="time course grade only (e.g. to compare two versions of the course)",
    )
    args = parser.parse_args()
    assignments = args.assignments or grading.assignments()
    with tempfile.TemporaryDirectory() as tmp:
        serial, parallel = Path(tmp, "serial"), Path(tmp, "parallel")
        for root in (serial, parallel):
            make_class(root, assignments, args.students)
        with open(serial / "nbgrader_config.py", "a") as f:  # stock nbgrader
            f.write(STOCK)
        t0 = time.perf_counter()
        for a in [] if args.no_baseline else assignments:
            grading.nbgrader("autograde", a, root=serial)
        t_serial = time.perf_counter() - t0
        t0 = time.perf_counter()
        cmd = [
            sys.executable,
            "-m",
            "course",
            "grade",
            *assignments,
            f"--root={parallel}",
        ]
        if args.workers:
            cmd.append(f"--workers={args.workers}")
        subprocess.run(cmd, check=True)
        t_parallel = time.perf_counter() - t0
        same = args.no_baseline or totals(serial, assignments) == totals(
            parallel, assignments
        )
    n = args.students * len(assignments)
    print(
        f"{n} submissions ({args.students} students x {len(assignments)} assignments)"
    )
    print(
        f"serial nbgrader autograde: {t_serial:.1f} s ({t_serial / n:.1f} s per notebook)"
    )
    print(
        f"course grade (parallel):   {t_parallel:.1f} s ({t_parallel / n:.1f} s per notebook)"
    )
    print(f"speedup: {t_serial / t_parallel:.2f}x; same scores: {same}")


if __name__ == "__main__":
    main()
