"""``python -m course grade``: autograde a class in parallel, and say what happened.

Every submission ends in one of three states, never a silent zero:

* ``graded`` — nbgrader ran it and stored its scores;
* ``flagged`` — graded, with something the instructor should look at (a test cell
  deleted or edited, a cell that timed out, output that was cut);
* ``failed`` — not graded, with the reason (no notebook, not valid JSON, the kernel
  died or ignored the interrupt, the whole run took too long).

Each submission is one task on dask.distributed (:mod:`course.grading.engine`):
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

from . import cluster, engine, gradebook, report
from .cells import folder, notebook_path, test_sources
from .engine import Job, Outcome
from .settings import Settings, resolve

GRADED, FLAGGED, FAILED = "graded", "flagged", "failed"
SKIPPED = "already graded"


@dataclass(kw_only=True)
class Result:
    """What happened to one submission."""

    student: str
    assignment: str
    status: str
    reasons: list[str] = field(default_factory=list)
    seconds: float = 0.0


def submissions(root: Path, assignment: str) -> list[str]:
    """Students with a folder for ``assignment`` under ``submitted/``."""
    base = root / "submitted"
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


def _outcome_result(job: Job, outcome: Outcome, flags: list[str]) -> Result:
    """Graded, flagged or failed, from the task's outcome and the submission's
    own flags (:func:`plan`)."""
    if not outcome.graded:
        return _result(job, FAILED, [_reason(outcome)], seconds=outcome.seconds)
    flags = flags + outcome.flags
    status = FLAGGED if flags else GRADED
    return _result(job, status, flags, seconds=outcome.seconds)


def _result(job: Job, status: str, reasons: list[str], *, seconds: float = 0.0):
    """The Result of a submission that a task was given."""
    return Result(
        student=job.student,
        assignment=job.assignment,
        status=status,
        reasons=reasons,
        seconds=seconds,
    )


def _reason(outcome: Outcome) -> str:
    if not outcome.finished:
        return "grading was stopped: the submission took longer than the time limit"
    return "nbgrader could not grade it: " + (
        outcome.error or f"exit code {outcome.returncode}"
    )


KILLED_WORKERS = (
    "it took down its grading worker twice (a crash of the whole process, or the "
    "machine out of memory); not graded"
)


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
        From :func:`course.grading.cluster.cluster`.
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
            result = _collect(root, job, future, flags=flags)
            # Collected: forgotten by the scheduler, so a worker lost later does
            # not grade this submission again (into the gradebook, after the run).
            future.release()
            counts[result.status] += 1
            results.append(result)
            bar.set_postfix(counts, refresh=False)
            bar.update()
    cluster.end_run(client, run)
    return sorted(results, key=lambda r: (r.assignment, r.student))


def _collect(root: Path, job: Job, future, *, flags: list[str]) -> Result:
    from distributed import KilledWorker

    try:
        outcome = future.result()
    except KilledWorker:
        return _result(job, FAILED, [KILLED_WORKERS])
    except Exception as err:  # the task itself broke: say so, grade the rest
        reason = f"the grading task failed: {err.__class__.__name__}: {err}"
        return _result(job, FAILED, [reason[:300]])
    if job.files is not None:
        engine.land(root, job, outcome)
    return _outcome_result(job, outcome, flags)


def _up_to_date(root: Path, assignment: str, student: str) -> bool:
    graded = notebook_path(root, "autograded", assignment, student=student)
    submitted = notebook_path(root, "submitted", assignment, student=student)
    return (
        graded.exists()
        and submitted.exists()
        and graded.stat().st_mtime >= submitted.stat().st_mtime
    )


def summary(results: list[Result]) -> str:
    """One line counting each state, then one line per submission that needs a look."""
    counts = {s: sum(r.status == s for r in results) for s in (GRADED, FLAGGED, FAILED)}
    skipped = sum(r.reasons == [SKIPPED] for r in results)
    lines = [
        f"{len(results)} submissions: {counts[GRADED]} graded, {counts[FLAGGED]} flagged, "
        f"{counts[FAILED]} failed ({skipped} skipped as already graded; --force regrades)"
    ]
    lines += [
        f"  {r.status:7s} {r.student}/{r.assignment} ({r.seconds:.0f} s): "
        f"{'; '.join(r.reasons)}"
        for r in results
        if r.status != GRADED
    ]
    return "\n".join(lines)


def write_log(results: list[Result], folder: Path, *, sandboxed: bool = True) -> Path:
    """``folder/grading.csv``: student, assignment, status, seconds, reasons; and
    ``folder/grading-run.json``: whether the run sandboxed its kernels."""
    import csv

    folder.mkdir(parents=True, exist_ok=True)
    (folder / report.RUN_FILE).write_text(json.dumps({"sandboxed": sandboxed}))
    path = folder / report.LOG_FILE
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["student", "assignment", "status", "seconds", "reasons"])
        for r in results:
            row = [r.student, r.assignment, r.status, f"{r.seconds:.1f}"]
            out.writerow(row + ["; ".join(r.reasons)])
    return path
