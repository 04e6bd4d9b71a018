"""``python -m course grade``: autograde a class in parallel, and say what happened.

Every submission ends graded, flagged or failed, never a silent zero
(:mod:`course.grading.run.results`).

Each submission is one task on dask.distributed (:mod:`course.grading.run.engine`):
one ``nbgrader autograde --student`` in a box of its own, every notebook in a fresh
kernel, so a submission that crashes its kernel cannot touch another's. Tasks share
the gradebook (:mod:`course.grading.gradebook`) and write to different
``autograded/<student>`` folders. Progress counts finished tasks (tqdm).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from .. import gradebook
from ..cells import folder, notebook_path, stage_folder, test_sources
from ..settings import Settings, resolve
from . import cluster, engine
from .results import FAILED, FLAGGED, GRADED, SKIPPED, Result, collect


def submissions(root: Path, assignment: str) -> list[str]:
    """Students with a folder for ``assignment`` under ``submitted/``."""
    base = stage_folder(root, "submitted")
    if not base.is_dir():
        return []
    return sorted(
        p.name
        for p in base.iterdir()
        if folder(root, "submitted", assignment, student=p.name).is_dir()
    )


def _precheck(root: Path, assignment: str, student: str) -> str | None:
    path = notebook_path(root, "submitted", assignment, student=student)
    links = [p for p in path.parent.rglob("*") if p.is_symlink()]
    if links:  # nbgrader would copy what it points at: another student's work
        return f"the submission holds a symbolic link ({links[0].name})"
    if not path.exists():
        return f"no notebook {path.name} in the submission"
    try:
        json.loads(path.read_text("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        return f"the notebook is not valid JSON ({err.__class__.__name__})"
    return None


def _test_sources(path: Path) -> dict[str, str]:
    return test_sources(json.loads(path.read_text("utf-8"))) if path.exists() else {}


def _test_cell_flags(released: dict[str, str], submitted: dict[str, str]) -> list[str]:
    """Differences between the submission's test cells and the release's."""
    flags = [
        f"test cell {c} was deleted (graded as 0 here)"
        for c in released
        if c not in submitted
    ]
    flags += [
        f"test cell {c} was edited (the original was restored and run)"
        for c in released
        if c in submitted and submitted[c].strip() != released[c].strip()
    ]
    return flags


@dataclass(kw_only=True)
class Plan:
    """What :func:`grade` will do: the submissions to grade, the Results of those
    it will not (already graded, or unreadable), and the gradebook they go to."""

    root: Path
    db_url: str
    todo: list[tuple[str, str]]  # (assignment, student)
    results: list[Result]
    registered: list[str]  # assignments put in the gradebook from source/ just now
    flags: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # todo's


def plan(*, root: Path, assignments: list[str], db_url: str, force: bool) -> Plan:
    """Decide what to grade and set the gradebook up for it, before any task runs.

    Raises :class:`course.grading.gradebook.NotReleased` for an assignment that
    the gradebook does not know and ``source/`` cannot register.
    """
    todo, results, flags = [], [], {}
    for assignment in assignments:
        released = _test_sources(notebook_path(root, "release", assignment))
        for s in submissions(root, assignment):
            if not force and _up_to_date(root, assignment, s):
                results.append(
                    Result(
                        student=s,
                        assignment=assignment,
                        status=GRADED,
                        reasons=[SKIPPED],
                    )
                )
            elif problem := _precheck(root, assignment, s):
                results.append(
                    Result(
                        student=s,
                        assignment=assignment,
                        status=FAILED,
                        reasons=[problem],
                    )
                )
            else:
                todo.append((assignment, s))
                submitted = notebook_path(root, "submitted", assignment, student=s)
                flags[assignment, s] = _test_cell_flags(
                    released, _test_sources(submitted)
                )
    students: dict[str, list[str]] = {a: [] for a in assignments}
    for assignment, student in todo:
        students[assignment].append(student)
    registered = gradebook.prepare(
        root=root, db_url=db_url, students_by_assignment=students
    )
    return Plan(
        root=root,
        db_url=db_url,
        todo=todo,
        results=results,
        registered=registered,
        flags=flags,
    )


def grade(
    plan: Plan,
    *,
    client,
    settings: Settings | None = None,
    ship_files: bool = False,
    show_progress: bool = True,
) -> list[Result]:
    """Autograde the plan's submissions, one dask task each; a Result for every
    submission, the plan's own included.

    Parameters
    ----------
    plan : Plan
        From :func:`plan`.
    client : distributed.Client
        From :func:`course.grading.run.cluster.cluster`.
    settings : Settings, optional
        Time per cell and per submission, sandbox, seeds
        (:func:`course.grading.settings.resolve`; default: the course's
        ``nbgrader_config.py``). A sandbox is off only as the instructor's
        explicit choice (``course grade --no-sandbox``).
    ship_files : bool
        Send each submission to its worker as bytes (workers without the course
        folder); the autograded notebook comes back as bytes.
    show_progress : bool
        A progress bar (tqdm, on stderr): done/total, rate, ETA and the counts.
    """
    from distributed import as_completed

    settings = settings or resolve(plan.root)
    root, jobs, run = plan.root, {}, uuid.uuid4().hex[:8]
    for assignment, student in plan.todo:
        job = engine.Job(
            assignment=assignment,
            student=student,
            root=None if ship_files else str(root),  # shipped: the worker never looks
            db_url=plan.db_url,
            settings=settings,
            files=engine.ship(root, assignment, student) if ship_files else None,
            run=run,
        )
        key = f"grade-{assignment}-{student}"
        jobs[client.submit(engine.grade_submission, job, key=key, pure=False)] = job
    results = list(plan.results)
    counts = dict.fromkeys((GRADED, FLAGGED, FAILED), 0)
    bar = tqdm(total=len(jobs), unit="nb", desc="grading", disable=not show_progress)
    with bar:
        for future in as_completed(jobs):
            job = jobs.pop(future)
            flags = plan.flags.get((job.assignment, job.student), [])
            result = collect(root, job, future, flags=flags)
            # Collected: forgotten by the scheduler, so a worker lost later does
            # not grade this submission again (into the gradebook, after the run).
            future.release()
            counts[result.status] += 1
            results.append(result)
            bar.set_postfix(counts, refresh=False)
            bar.update()
    cluster.end_run(client, run)
    return sorted(results, key=lambda r: (r.assignment, r.student))


def _up_to_date(root: Path, assignment: str, student: str) -> bool:
    graded = notebook_path(root, "autograded", assignment, student=student)
    submitted = notebook_path(root, "submitted", assignment, student=student)
    return (
        graded.exists()
        and submitted.exists()
        and graded.stat().st_mtime >= submitted.stat().st_mtime
    )
