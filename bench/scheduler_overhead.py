"""Benchmark: what dask adds to each grading task, on trivial notebooks.

A throw-away assignment whose notebook is one answer cell and one test cell is
submitted by ``--students`` students and graded through the engine
(:func:`course.grading.run.batch.grade`) on the embedded cluster. Each task reports its
own seconds (nbgrader start to finish, measured in the task); what the workers spent
on anything else is the overhead:

    overhead per task = (wall time x workers - sum of task seconds) / tasks

It holds scheduling, moving the job and the outcome, the coordinator's checks of
each graded notebook, and the idle tail at the end. Also printed: the round trip of
a no-op dask task on the same cluster, the scheduler's floor.

    .venv/bin/python bench/scheduler_overhead.py --students 60
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import nbformat

from course import grading
from course.grading import gradebook
from course.grading.run import batch, cluster
from course.grading.run.results import GRADED

A = "00_trivial"


def _cell(kind: str, source: str, grade_id: str, **meta) -> nbformat.NotebookNode:
    make = (
        nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
    )
    cell = make(source)
    cell.metadata["nbgrader"] = {
        "grade_id": grade_id,
        "schema_version": 3,
        "locked": not meta.get("solution", False),
        "solution": meta.get("solution", False),
        "grade": meta.get("grade", False),
        "task": False,
        **({"points": meta["points"]} if "points" in meta else {}),
    }
    return cell


def make_class(root: Path, students: int) -> None:
    """A course folder with the trivial assignment released and submitted."""
    grading.make_course(root)
    source = root / "source" / A
    source.mkdir()
    nb = nbformat.v4.new_notebook()
    answer = "### BEGIN SOLUTION\nx = 1\n### END SOLUTION\n"
    nb.cells = [
        _cell("code", answer, "answer", solution=True),
        _cell("code", "assert x == 1\n", "test_answer", grade=True, points=1),
    ]
    nbformat.write(nb, source / f"{A}.ipynb")
    grading.release([A], root)
    submission = nbformat.read(root / "release" / A / f"{A}.ipynb", as_version=4)
    submission.cells[0].source = "x = 1\n"
    for k in range(students):
        path = grading.notebook_path(root, "submitted", A, student=f"s{k:04d}")
        path.parent.mkdir(parents=True)
        nbformat.write(submission, path)


def noop() -> None:
    """A task that does nothing."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=60)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "course"
        make_class(root, args.students)
        plan = batch.plan(
            root=root, assignments=[A], db_url=gradebook.url(root), force=True
        )
        with cluster.cluster(workers=args.workers) as client:
            start = time.perf_counter()
            results = batch.grade(plan, client=client, show_progress=False)
            wall = time.perf_counter() - start
            trips = []
            for _ in range(200):
                t = time.perf_counter()
                client.submit(noop, pure=False).result()
                trips.append(time.perf_counter() - t)
    graded = sum(r.status == GRADED for r in results)
    busy = sum(r.seconds for r in results)
    overhead = (wall * args.workers - busy) / len(results)
    print(f"{len(results)} trivial notebooks ({graded} graded), {args.workers} workers")
    print(
        f"wall {wall:.1f} s; task seconds {busy:.1f} ({busy / len(results):.2f} each)"
    )
    print(f"overhead per task: {overhead * 1000:.0f} ms")
    print(f"no-op task round trip: median {statistics.median(trips) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
