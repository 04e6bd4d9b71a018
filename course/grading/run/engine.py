"""Grade a class on dask.distributed: each submission (student, assignment) is one
task, on the workers of :func:`course.grading.run.cluster.cluster`.

* **A task** (:func:`grade_submission`) runs one ``nbgrader autograde ASSIGNMENT
  --student STUDENT`` in a task box (:func:`course.grading.kernel.contain.open_task_box`),
  under its own time budget, and closes the box after it: no process outlives it.
  It dies with its worker (its connection to the worker closes); the next worker on
  the machine closes the box it left (:func:`course.grading.kernel.contain.sweep_orphans`),
  and when the run ends every box of the run is closed
  (:func:`course.grading.run.cluster.end_run`).
* **Files.** On a shared file system the worker reads ``submitted/`` and writes
  ``autograded/`` itself. With ``ship_files`` the submission travels to the worker
  as bytes and the autograded notebook comes back as bytes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from distributed import get_worker

from .. import nbgrader_app
from ..cells import folder, notebook_path
from ..environment import tool_env
from ..kernel import contain
from ..kernel import warm as warm_kernels
from ..nbgrader_app import private_url
from ..settings import Settings
from ..steps import flags
from .cluster import PLUGIN


@dataclass(frozen=True, kw_only=True)
class Job:
    """What one task needs: plain data, so that it travels to any worker.

    ``files`` (relative path -> bytes) is set when the worker has no shared file
    system: ``nbgrader_config.py``, ``source/<a>/`` less notebooks, and the
    submission's folder.
    """

    assignment: str
    student: str
    root: str | None  # the course folder on a shared file system; None if shipped
    db_url: str
    settings: Settings  # the run's settings (nbgrader_config.py and its flags)
    files: dict[str, bytes] | None = None
    run: str = "run"  # the grading run: its task boxes are closed when it ends


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What one task reports, decided on the worker.

    ``finished``: nbgrader ended within the submission's time; ``returncode``: its
    exit code; ``graded``: it wrote the autograded notebook; ``flags``: what that
    notebook's error names and output limits say the instructor should look at
    (:func:`course.grading.steps.flags.flags`); ``error``: nbgrader's last error line,
    when it could not grade; ``files``: with shipped files, the autograded
    folder's files.
    """

    finished: bool
    returncode: int
    graded: bool
    flags: list[str] = field(default_factory=list)
    error: str = ""
    seconds: float = 0.0
    worker: str = "local"
    files: dict[str, bytes] | None = None


def grade_submission(job: Job) -> Outcome:
    """The task: autograde one submission in its own box, within its budget, and
    read what the graded notebook says."""
    start = time.monotonic()
    try:
        worker = get_worker()
        plugin = worker.plugins.get(PLUGIN)
        name = worker.address
    except ValueError:  # called outside a worker (tests, a debugger)
        plugin, name = None, "local"
    env = dict(plugin.env) if plugin is not None and plugin.env else tool_env()
    with tempfile.TemporaryDirectory(prefix="course-task-") as scratch:
        root = _unpack(job, Path(scratch)) if job.files is not None else Path(job.root)
        log, code, finished = _run_nbgrader(job, root, env)
        graded = notebook_path(root, "autograded", job.assignment, student=job.student)
        ok = finished and code == 0 and graded.exists()
        files = None
        if job.files is not None:
            files = _pack(
                folder(root, "autograded", job.assignment, student=job.student)
            )
        return Outcome(
            finished=finished,
            returncode=code,
            graded=ok,
            flags=flags.flags(json.loads(graded.read_text("utf-8"))) if ok else [],
            error="" if ok else _last_error(log),
            seconds=time.monotonic() - start,
            worker=name,
            files=files,
        )


#: A traceback's last line: the exception and its message.
EXCEPTION = re.compile(r"^\s*[A-Za-z_][\w.]*(Error|Exception|Exit)\b[^:]*: \S")
#: nbgrader's lines that only point at the traceback above them.
POINTERS = ("Please see the", "There was an error processing")


def _last_error(log: str) -> str:
    """Why nbgrader failed, in one line: the last exception of its log, else its
    last error line that says more than "see above" (empty if none)."""
    lines = log.splitlines()
    found = [ln for ln in lines if EXCEPTION.match(ln)] or [
        ln
        for ln in lines
        if ("ERROR" in ln or "Error" in ln) and not any(p in ln for p in POINTERS)
    ]
    return found[-1].strip()[:200] if found else ""


def _arguments(job: Job, root: Path, env: dict) -> list[str]:
    """``nbgrader autograde``'s arguments for one submission: the run's settings
    as nbgrader's traits (:meth:`course.grading.settings.Settings.argv`)."""
    argv = [
        "autograde",
        job.assignment,
        f"--student={job.student}",
        "--force",
        f"--CourseDirectory.root={root}",
        *job.settings.argv(),
    ]
    if warm_kernels.SOCKET_ENV in env:
        argv.append(f"--Execute.kernel_name={warm_kernels.KERNEL}")
    return argv


def _run_nbgrader(job: Job, root: Path, env: dict) -> tuple[str, int, bool]:
    """nbgrader in a task box, forked warm where it can be; the box closed after
    it, however it ended: its log, exit code, and whether it finished in time."""
    box = contain.open_task_box(job.run)
    env = {**env, **box, **private_url(job.db_url)}  # no password on a command line
    argv = _arguments(job, root, env)
    seconds = job.settings.notebook_timeout + 60  # nbgrader's own slack
    pid = None
    try:
        ran = warm_kernels.nbgrader(argv, cwd=str(root), env=env, timeout=seconds)
        log, code, pid, finished = ran or _run_cold(argv, root, env, seconds=seconds)
    finally:
        contain.close_box(box, pid)
    return log, code, finished


def _run_cold(
    argv: list[str], root: Path, env: dict, *, seconds: float
) -> tuple[str, int, int, bool]:
    """``nbgrader ARGV`` as a new process: output, exit code, pid, finished."""

    def child() -> None:
        contain.die_with_parent()
        contain.join_task_box(env)

    proc = subprocess.Popen(
        [sys.executable, "-m", nbgrader_app.__name__, *argv],
        cwd=root,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=child,
    )
    try:
        log, _ = proc.communicate(timeout=seconds)
        return log, proc.returncode, proc.pid, True
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        log, _ = proc.communicate()
        return log, proc.returncode, proc.pid, False


def _unpack(job: Job, scratch: Path) -> Path:
    for rel, data in (job.files or {}).items():
        path = scratch / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return scratch


def _pack(folder: Path) -> dict[str, bytes]:
    if not folder.is_dir():
        return {}
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def ship(root: Path, assignment: str, student: str) -> dict[str, bytes]:
    """The files a worker without the course folder needs for one submission."""
    files = {"nbgrader_config.py": (root / "nbgrader_config.py").read_bytes()}
    source = folder(root, "source", assignment)
    for path in sorted(source.rglob("*")):  # files nbgrader copies next to the notebook
        if path.is_file() and path.suffix != ".ipynb":
            files[str(path.relative_to(root))] = path.read_bytes()
    submission = folder(root, "submitted", assignment, student=student)
    for path in sorted(submission.rglob("*")):
        if path.is_file():
            files[str(path.relative_to(root))] = path.read_bytes()
    return files


def land(root: Path, job: Job, outcome: Outcome) -> None:
    """Write a shipped task's autograded files into ``root/autograded``."""
    graded = folder(root, "autograded", job.assignment, student=job.student)
    shutil.rmtree(graded, ignore_errors=True)
    for rel, data in (outcome.files or {}).items():
        path = graded / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
