"""What happened to each submission of a grading run, and what ``course grade``
tells the instructor of it.

Every submission ends in one of three states, never a silent zero:

* ``graded`` — nbgrader ran it and stored its scores;
* ``flagged`` — graded, with something the instructor should look at (a test cell
  deleted or edited, a cell that timed out, output that was cut);
* ``failed`` — not graded, with the reason (no notebook, not valid JSON, the kernel
  died or ignored the interrupt, the whole run took too long).

:func:`collect` reads a finished task (:mod:`course.grading.run.engine`);
:func:`summary` and :func:`write_log` report the run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from . import engine, report
from .engine import Job, Outcome

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


KILLED_WORKERS = (
    "it took down its grading worker twice (a crash of the whole process, or the "
    "machine out of memory); not graded"
)


def collect(root: Path, job: Job, future, *, flags: list[str]) -> Result:
    """The Result of a finished task: graded, flagged or failed.

    Parameters
    ----------
    root : Path
        The course folder; a shipped task's autograded files land in it.
    job : Job
        What the task was given.
    future : distributed.Future
        The task, finished.
    flags : list of str
        What :func:`course.grading.run.batch.plan` flagged in the submission itself.

    Returns
    -------
    Result
        Failed if the task broke or took its workers down; else as its outcome
        and ``flags`` say.
    """
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


def _outcome_result(job: Job, outcome: Outcome, flags: list[str]) -> Result:
    """Graded, flagged or failed, from the task's outcome and the submission's
    own flags (:func:`course.grading.run.batch.plan`)."""
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
