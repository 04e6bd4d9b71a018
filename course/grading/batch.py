"""``python -m course grade``: autograde a class in parallel, and say what happened.

Every submission ends in one of three states, never a silent zero:

* ``graded`` — nbgrader ran it and stored its scores;
* ``flagged`` — graded, with something the instructor should look at (a test cell
  deleted or edited, a cell that timed out, output that was cut);
* ``failed`` — not graded, with the reason (no notebook, not valid JSON, the kernel
  died or ignored the interrupt, the whole run took too long).

Each submission is one ``nbgrader autograde --student`` process, so a submission
that crashes its kernel cannot touch another's; workers share the gradebook (SQLite
with a generous lock timeout) and write to different ``autograded/<student>``
folders.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from . import cell_messages, cell_scores, notebook_path

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
    released = _locked_sources(notebook_path(root, "release", assignment))
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
    return flags


def grade_one(
    root: Path, assignment: str, student: str, timeout: float, cell_timeout: int
) -> Result:
    """Autograde one submission in its own nbgrader process."""
    start = time.monotonic()
    problem = _precheck(root, assignment, student)
    if problem:
        return Result(student, assignment, FAILED, [problem])
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    db = f"sqlite:///{root / 'gradebook.db'}?timeout=120"
    cmd = [
        sys.executable,
        "-m",
        "nbgrader",
        "autograde",
        assignment,
        f"--student={student}",
        "--force",
        f"--CourseDirectory.root={root}",
        f"--CourseDirectory.db_url={db}",
        f"--Execute.timeout={cell_timeout}",
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        log, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return Result(
            student,
            assignment,
            FAILED,
            [f"grading took longer than {timeout:.0f} s and was stopped"],
            time.monotonic() - start,
        )
    seconds = time.monotonic() - start
    graded = notebook_path(root, "autograded", assignment, student)
    if (
        proc.returncode != 0
        or "There was an error processing" in log
        or not graded.exists()
    ):
        return Result(student, assignment, FAILED, [_reason(log)], seconds)
    flags = _flags(root, assignment, student)
    if "Timeout waiting for execute reply" in log:
        flags.append(f"a cell timed out after {cell_timeout} s and was interrupted")
    return Result(student, assignment, FLAGGED if flags else GRADED, flags, seconds)


def _reason(log: str) -> str:
    if "Kernel died" in log or "DeadKernelError" in log:
        return "the kernel died while running the notebook (os._exit, a crash or out of memory)"
    if "Timeout" in log or "timed out" in log:
        return "a cell did not stop when interrupted after the time limit (does it ignore SIGINT?)"
    lines = [ln for ln in log.splitlines() if "ERROR" in ln or "Error" in ln]
    return "nbgrader could not grade it: " + (
        lines[-1].strip()[:200] if lines else "see the log"
    )


def grade(
    root: Path,
    assignment: str,
    workers: int | None = None,
    force: bool = False,
    timeout: float = 1800,
    cell_timeout: int = 120,
    progress=print,
) -> list[Result]:
    """Autograde every submission of ``assignment`` under ``root/submitted``.

    Parameters
    ----------
    workers : int, optional
        Parallel nbgrader processes (default: the number of cores).
    force : bool
        Regrade submissions already graded (default: resume, skipping them).
    timeout, cell_timeout : float, int
        Seconds for one whole submission, and for one cell.
    """
    students = submissions(root, assignment)
    todo = [s for s in students if force or not _up_to_date(root, assignment, s)]
    results = [
        Result(s, assignment, GRADED, [SKIPPED]) for s in students if s not in todo
    ]
    workers = workers or os.cpu_count() or 1
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [
            pool.submit(grade_one, root, assignment, s, timeout, cell_timeout)
            for s in todo
        ]
        for done, future in enumerate(as_completed(futures), 1):
            results.append(future.result())
            elapsed = time.monotonic() - start
            eta = elapsed / done * (len(todo) - done)
            progress(
                f"\r[{'#' * (20 * done // len(todo)):<20}] {done}/{len(todo)} {assignment}  {elapsed:.0f}s elapsed, ETA {eta:.0f}s",
                end="",
            )
    if todo:
        progress("")
    return sorted(results, key=lambda r: r.student)


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
        f"  {r.status:7s} {r.student}/{r.assignment}: {'; '.join(r.reasons)}"
        for r in results
        if r.status != GRADED
    ]
    return "\n".join(lines)


def scores_table(
    root: Path, assignment: str
) -> dict[str, dict[str, tuple[float, float]]]:
    """Per student and test cell ``(score, max)`` (see :func:`course.grading.cell_scores`)."""
    return cell_scores(root, assignment)


def messages_table(
    root: Path, assignment: str, students: list[str]
) -> dict[str, dict[str, str]]:
    """Per student the verdict of each failing cell of the autograded notebook."""
    out = {}
    for s in students:
        path = notebook_path(root, "autograded", assignment, s)
        out[s] = cell_messages(path) if path.exists() else {}
    return out
