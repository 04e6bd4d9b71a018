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

from . import engine, gradebook, notebook_path, report
from .enames import DEAF, KERNEL_DIED, NOT_RUN, TAMPERED
from .engine import Job, Outcome

GRADED, FLAGGED, FAILED = "graded", "flagged", "failed"
SKIPPED = "already graded"


@dataclass
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
    return sorted(p.name for p in base.iterdir() if (p / assignment).is_dir())


def _precheck(root: Path, assignment: str, student: str) -> str | None:
    path = notebook_path(root, "submitted", assignment, student)
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


def _locked_sources(path: Path) -> dict[str, str]:
    nb = json.loads(path.read_text("utf-8"))
    out = {}
    for cell in nb.get("cells", []):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            out[meta["grade_id"]] = "".join(cell.get("source", ""))
    return out


def _flags(root: Path, assignment: str, student: str) -> list[str]:
    """Differences between the submission's test cells and the release's."""
    release = notebook_path(root, "release", assignment)
    released = _locked_sources(release) if release.exists() else {}
    submitted = _locked_sources(notebook_path(root, "submitted", assignment, student))
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
    graded = notebook_path(root, "autograded", assignment, student)
    if graded.exists():
        text = graded.read_text("utf-8")
        if "output truncated" in text.lower():
            flags.append("output was truncated")
        flags += output_flags(json.loads(text))
    return flags


def output_flags(nb: dict) -> list[str]:
    """What the graded notebook's error outputs say the instructor should know."""
    flags = []
    for k, cell in enumerate(nb.get("cells", [])):
        name = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", f"#{k}")
        for out in cell.get("outputs", []):
            if out.get("output_type") != "error":
                continue
            ename, evalue = out.get("ename", ""), out.get("evalue", "")
            if ename == TAMPERED:
                flags.append(f"tampering: {evalue.split(':')[0]}")
            elif ename == NOT_RUN:
                flags.append(f"later cells {evalue}")
            elif ename in (KERNEL_DIED, DEAF):
                flags.append(
                    f"cell {name}: {evalue or 'timed out and was interrupted'}"
                )
            elif ename == "MemoryError" or "allocate memory" in evalue:
                flags.append(f"cell {name} ran out of memory (the per-kernel limit)")
    return list(dict.fromkeys(flags))  # once each, in order


def _outcome_result(root: Path, job: Job, outcome: Outcome) -> Result:
    """Graded, flagged or failed, from nbgrader's log and the autograded notebook."""
    graded = notebook_path(root, "autograded", job.assignment, job.student)
    if "There was an error processing" in outcome.log or not graded.exists():
        return Result(
            job.student, job.assignment, FAILED, [_reason(outcome)], outcome.seconds
        )
    flags = _flags(root, job.assignment, job.student)
    status = FLAGGED if flags else GRADED
    return Result(job.student, job.assignment, status, flags, outcome.seconds)


def _reason(outcome: Outcome) -> str:
    log = outcome.log
    if "past the time limit of the submission" in log:
        return "grading was stopped: the submission took longer than the time limit"
    if "Kernel died" in log or "DeadKernelError" in log:
        return "the kernel died while running the notebook (os._exit, a crash or out of memory)"
    if "Timeout" in log or "timed out" in log:
        return "a cell did not stop when interrupted after the time limit (does it ignore SIGINT?)"
    lines = [ln for ln in log.splitlines() if "ERROR" in ln or "Error" in ln]
    return "nbgrader could not grade it: " + (
        lines[-1].strip()[:200] if lines else f"exit code {outcome.returncode}"
    )


KILLED_WORKERS = (
    "it took down its grading worker twice (a crash of the whole process, or the "
    "machine out of memory); not graded"
)


@dataclass
class Plan:
    """What :func:`grade` will do: the submissions to grade, the Results of those
    it will not (already graded, or unreadable), and the gradebook they go to."""

    root: Path
    db_url: str
    todo: list[tuple[str, str]]  # (assignment, student)
    results: list[Result]
    registered: list[str]  # assignments put in the gradebook from source/ just now


def plan(*, root: Path, assignments: list[str], db_url: str, force: bool) -> Plan:
    """Decide what to grade and set the gradebook up for it, before any task runs.

    Raises :class:`course.grading.gradebook.NotReleased` for an assignment that
    the gradebook does not know and ``source/`` cannot register.
    """
    todo, results = [], []
    for assignment in assignments:
        for s in submissions(root, assignment):
            if not force and _up_to_date(root, assignment, s):
                results.append(Result(s, assignment, GRADED, [SKIPPED]))
            elif problem := _precheck(root, assignment, s):
                results.append(Result(s, assignment, FAILED, [problem]))
            else:
                todo.append((assignment, s))
    students: dict[str, list[str]] = {a: [] for a in assignments}
    for assignment, student in todo:
        students[assignment].append(student)
    registered = gradebook.prepare(
        root=root, db_url=db_url, students_by_assignment=students
    )
    return Plan(root, db_url, todo, results, registered)


def grade(
    plan: Plan,
    *,
    client,
    timeout: float = 1800,
    cell_timeout: int = 120,
    fixed_seeds: bool = False,
    ship_files: bool = False,
    sandbox: bool = True,
    show_progress: bool = True,
) -> list[Result]:
    """Autograde the plan's submissions, one dask task each; a Result for every
    submission, the plan's own included.

    Parameters
    ----------
    plan : Plan
        From :func:`plan`.
    client : distributed.Client
        From :func:`course.grading.engine.cluster`.
    timeout, cell_timeout : float, int
        Seconds allowed per submission, per cell.
    fixed_seeds : bool
        Run hidden tests with the seeds of ``source/`` (to reproduce a grade).
    ship_files : bool
        Send each submission to its worker as bytes (workers without the course
        folder); the autograded notebook comes back as bytes.
    sandbox : bool
        Every kernel in a sandbox (:mod:`course.grading.sandbox`); ``False`` only
        as the instructor's explicit choice (``course grade --no-sandbox``).
    show_progress : bool
        A progress bar (tqdm, on stderr): done/total, rate, ETA and the counts.
    """
    from distributed import as_completed

    root, jobs, run = plan.root, {}, uuid.uuid4().hex[:8]
    for assignment, student in plan.todo:
        files = engine.ship(root, assignment, student) if ship_files else None
        folder = None if ship_files else str(root)  # shipped: the worker never looks
        job = engine.Job(
            assignment, student, folder, plan.db_url, timeout, cell_timeout,
            fixed_seeds, files, run, sandbox,
        )  # fmt: skip
        key = f"grade-{assignment}-{student}"
        jobs[client.submit(engine.grade_submission, job, key=key, pure=False)] = job
    results = list(plan.results)
    counts = dict.fromkeys((GRADED, FLAGGED, FAILED), 0)
    bar = tqdm(total=len(jobs), unit="nb", desc="grading", disable=not show_progress)
    with bar:
        for future in as_completed(jobs):
            result = _collect(root, jobs[future], future)
            counts[result.status] += 1
            results.append(result)
            bar.set_postfix(counts, refresh=False)
            bar.update()
    engine.end_run(client, run)
    return sorted(results, key=lambda r: (r.assignment, r.student))


def _collect(root: Path, job: Job, future) -> Result:
    from distributed import KilledWorker

    try:
        outcome = future.result()
    except KilledWorker:
        return Result(job.student, job.assignment, FAILED, [KILLED_WORKERS])
    except Exception as err:  # the task itself broke: say so, grade the rest
        reason = f"the grading task failed: {err.__class__.__name__}: {err}"
        return Result(job.student, job.assignment, FAILED, [reason[:300]])
    if job.files is not None:
        engine.land(root, job, outcome)
    return _outcome_result(root, job, outcome)


def _up_to_date(root: Path, assignment: str, student: str) -> bool:
    graded = notebook_path(root, "autograded", assignment, student)
    submitted = notebook_path(root, "submitted", assignment, student)
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
    path = folder / "grading.csv"
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["student", "assignment", "status", "seconds", "reasons"])
        for r in results:
            row = [r.student, r.assignment, r.status, f"{r.seconds:.1f}"]
            out.writerow(row + ["; ".join(r.reasons)])
    return path
