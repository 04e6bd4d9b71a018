"""Benchmark: ``course grade`` on dask vs plain serial ``nbgrader autograde``.

Builds a class of fixture students (the reference solution of each assignment) and
grades it three ways, each in its own copy of the course folder: stock serial
``nbgrader autograde`` (nbgrader's own autograde steps, one process per assignment),
``course grade`` on its embedded LocalCluster, and ``course grade`` on a ``dask
scheduler`` with one ``dask worker --nworkers 2`` started with their CLIs. It checks
that the scores agree and prints the speedups as ratios. Timing belongs here, not in
the tests. The cluster's start-up is inside each ``course grade`` time.

    .venv/bin/python bench/grade_speedup.py --students 20            # all assignments
    .venv/bin/python bench/grade_speedup.py --students 6 01_config    # a quick run
    .venv/bin/python bench/grade_speedup.py --students 4 --no-baseline  # course grade only
    .venv/bin/python bench/grade_speedup.py --students 10 --sandbox-rounds 3 01_config

``--sandbox-rounds R`` measures what the sandbox costs instead: the same class graded
R times with and R times without it (``--no-sandbox``), alternating, on the
embedded cluster; it prints the mean task and run times and their ratios.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from harness import fill, reference_answers  # noqa: E402
from services import dask_cluster  # noqa: E402

from course import grading  # noqa: E402
from course.grading import cells  # noqa: E402

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
            path = grading.notebook_path(root, "submitted", a, student=f"s{i:03d}")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(nb))


def totals(root: Path, assignments: list[str]) -> dict:
    out = {}
    for a in assignments:
        for s, scores in grading.cell_scores(root, a).items():
            out[(a, s)] = sum(
                v[0] or 0 for c, v in scores.items() if cells.is_test_id(c)
            )
    return out


def course_grade(root: Path, assignments: list[str], *options: str) -> float:
    """Seconds ``course grade`` takes on ``root``."""
    cmd = [sys.executable, "-m", "course", "grade", *assignments, f"--root={root}"]
    start = time.perf_counter()
    subprocess.run([*cmd, *options], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def task_seconds(root: Path) -> float:
    """Mean seconds of one task (one notebook, on one worker) in grading.csv."""
    with open(root / "reports" / "grading.csv") as f:
        seconds = [float(row["seconds"]) for row in csv.DictReader(f)]
    return sum(seconds) / len(seconds)


def sandbox_cost(assignments: list[str], students: int, rounds: int) -> None:
    """Alternate course grade with and without the sandbox; print the ratios."""
    runs: dict[str, list[tuple[float, float]]] = {"sandbox": [], "no sandbox": []}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp, "class")
        make_class(root, assignments, students)
        for r in range(rounds):
            order = (
                ("sandbox", "no sandbox") if r % 2 == 0 else ("no sandbox", "sandbox")
            )
            for way in order:
                extra = ["--force"] + (["--no-sandbox"] if way == "no sandbox" else [])
                wall = course_grade(root, assignments, *extra)
                runs[way].append((wall, task_seconds(root)))
    mean = {
        way: [sum(x) / len(x) for x in zip(*r, strict=True)] for way, r in runs.items()
    }
    for way, (wall, task) in mean.items():
        print(f"{way:12s} run {wall:7.2f} s   task {task:5.3f} s")
    (wall_on, task_on), (wall_off, task_off) = mean["sandbox"], mean["no sandbox"]
    print(
        f"sandbox / no sandbox: run {wall_on / wall_off:.3f}x, task {task_on / task_off:.3f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("assignments", nargs="*")
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument(
        "--no-baseline",
        action="store_true",
        help="time course grade only (e.g. to compare two versions of the course)",
    )
    parser.add_argument("--sandbox-rounds", type=int, default=0)
    args = parser.parse_args()
    assignments = args.assignments or grading.assignments()
    if args.sandbox_rounds:
        sandbox_cost(assignments, args.students, args.sandbox_rounds)
        return
    ways = ("serial", "local", "cli")
    with tempfile.TemporaryDirectory() as tmp:
        roots = {way: Path(tmp, way) for way in ways}
        for root in roots.values():
            make_class(root, assignments, args.students)
        with open(roots["serial"] / "nbgrader_config.py", "a") as f:  # stock
            f.write(STOCK)
        seconds = dict.fromkeys(ways, 0.0)
        t0 = time.perf_counter()
        for a in [] if args.no_baseline else assignments:
            grading.nbgrader("autograde", a, root=roots["serial"])
        seconds["serial"] = time.perf_counter() - t0
        seconds["local"] = course_grade(roots["local"], assignments)
        with dask_cluster(Path(tmp), workers=2) as (file, tls):
            seconds["cli"] = course_grade(
                roots["cli"], assignments, f"--scheduler-file={file}", *tls.flags()
            )
        scores = {way: totals(roots[way], assignments) for way in ways}
        per_task = {way: task_seconds(roots[way]) for way in ("local", "cli")}
    same = scores["local"] == scores["cli"] and (
        args.no_baseline or scores["serial"] == scores["local"]
    )
    n = args.students * len(assignments)
    print(
        f"{n} submissions ({args.students} students x {len(assignments)} assignments)"
    )
    names = {
        "serial": "stock serial nbgrader autograde",
        "local": "course grade, embedded LocalCluster",
        "cli": "course grade, CLI scheduler + 2 workers",
    }
    for way in ways:
        t = seconds[way]
        speedup = seconds["serial"] / t if t and seconds["serial"] else float("nan")
        print(f"{names[way]:40s} {t:7.1f} s  {t / n:5.2f} s/notebook  {speedup:.2f}x")
        if way in per_task:
            print(f"{'':40s} one task (a notebook on a worker): {per_task[way]:.2f} s")
    print(f"same scores: {same}")


if __name__ == "__main__":
    main()
