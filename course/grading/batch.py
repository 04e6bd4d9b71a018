"""``python -m course grade``: autograde a class in parallel, and say what happened.

Every submission ends in one of three states, never a silent zero:

* ``graded`` — nbgrader ran it and stored its scores;
* ``flagged`` — graded, with something the instructor should look at (a test cell
  deleted or edited, a cell that timed out, output that was cut);
* ``failed`` — not graded, with the reason (no notebook, not valid JSON, the kernel
  died or ignored the interrupt, the whole run took too long).

Submissions are dealt to worker shards; each shard is one ``nbgrader autograde``
process over its students, every notebook in a fresh kernel, so a submission that
crashes its kernel cannot touch another's. Workers share the gradebook (SQLite with
a generous lock timeout) and write to different ``autograded/<student>`` folders.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from . import cell_messages, cell_scores, notebook_path
from . import warm as warm_kernels
from .execute import DEAF, KERNEL_DIED, NOT_RUN
from .tamper import TAMPERED

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


def _env() -> dict:
    # nbgrader runs `alembic`/`jupyter` from PATH; one thread per kernel, since the
    # workers already keep every core busy.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "PATH": path, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _shard(root: Path, assignment: str, students: list[str], k: int, tmp: Path) -> Path:
    """A course folder for one worker: its students only, everything else shared."""
    shard = tmp / f"worker{k}"
    (shard / "submitted").mkdir(parents=True)
    shutil.copy(root / "nbgrader_config.py", shard / "nbgrader_config.py")
    for name in ("source", "release"):
        (shard / name).symlink_to(root / name)
    (root / "autograded").mkdir(exist_ok=True)
    (shard / "autograded").symlink_to(root / "autograded")
    for s in students:
        (shard / "submitted" / s).symlink_to(root / "submitted" / s)
    return shard


def _run_shard(
    root, assignment, students, shard, timeout, cell_timeout, tick, env
) -> dict[str, Result]:
    """One ``nbgrader autograde`` process over a shard; a Result per student."""
    start = time.monotonic()
    db = f"sqlite:///{root / 'gradebook.db'}?timeout=300"
    # With a zygote, nbgrader itself is forked from it, torch and the judge loaded.
    program = ["course.grading.warm", "--nbgrader"]
    cmd = [
        sys.executable,
        "-m",
        *(program if warm_kernels.SOCKET_ENV in env else ["nbgrader"]),
        "autograde",
        assignment,
        "--force",
        f"--CourseDirectory.root={shard}",
        f"--CourseDirectory.db_url={db}",
        f"--Execute.timeout={cell_timeout}",
        f"--GuardedExecute.notebook_timeout={timeout}",  # a budget per submission
    ]
    if warm_kernels.SOCKET_ENV in env:
        cmd.append(f"--Execute.kernel_name={warm_kernels.KERNEL}")
    proc = subprocess.Popen(
        cmd,
        cwd=shard,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    logs = {s: [] for s in students}
    seconds = dict.fromkeys(students, 0.0)
    current, since = None, start
    # Each notebook stops itself at ``timeout``; this only guards against nbgrader.
    deadline = start + (timeout + 60) * len(students)
    for line in proc.stdout:
        for s in students:
            if (
                f"/submitted/{s}/" in line
                or f"/autograded/{s}/" in line
                or f"student '{s}'" in line
            ):
                if current != s:
                    now = time.monotonic()
                    if current is not None:
                        seconds[current] += now - since
                        tick()
                    current, since = s, now
        if current:
            logs[current].append(line)
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            break
    proc.wait()
    if current:
        seconds[current] += time.monotonic() - since
        tick()
    out = {}
    for s in students:
        log = "".join(logs[s])
        graded = notebook_path(root, "autograded", assignment, s)
        if "There was an error processing" in log or not graded.exists():
            out[s] = Result(s, assignment, FAILED, [_reason(log)], seconds[s])
            continue
        flags = _flags(root, assignment, s)
        status = FLAGGED if flags else GRADED
        out[s] = Result(s, assignment, status, flags, seconds[s])
    return out


def _reason(log: str) -> str:
    if "Kernel died" in log or "DeadKernelError" in log:
        return "the kernel died while running the notebook (os._exit, a crash or out of memory)"
    if "Timeout" in log or "timed out" in log:
        return "a cell did not stop when interrupted after the time limit (does it ignore SIGINT?)"
    if not log:
        return "grading was stopped: the submission took longer than the time limit"
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
    env: dict | None = None,
) -> list[Result]:
    """Autograde every submission of ``assignment`` under ``root/submitted``.

    The submissions to grade are dealt round-robin to ``workers`` shards; each
    shard is one ``nbgrader autograde`` process (so its start-up cost is paid once
    per worker, not once per student) writing to the shared gradebook.

    Parameters
    ----------
    workers : int, optional
        Parallel nbgrader processes (default: the number of cores).
    force : bool
        Regrade submissions already graded (default: resume, skipping them).
    timeout, cell_timeout : float, int
        Seconds allowed per submission (a shard gets this times its size), per cell.
    env : dict, optional
        Environment of the nbgrader processes, from :func:`kernels` (default: cold
        kernels).
    """
    env = env or _env()
    students = submissions(root, assignment)
    todo = [s for s in students if force or not _up_to_date(root, assignment, s)]
    results = [
        Result(s, assignment, GRADED, [SKIPPED]) for s in students if s not in todo
    ]
    for s in list(todo):
        problem = _precheck(root, assignment, s)
        if problem:
            results.append(Result(s, assignment, FAILED, [problem]))
            todo.remove(s)
    workers = max(1, min(workers or os.cpu_count() or 1, len(todo) or 1))
    shards = [todo[k::workers] for k in range(workers) if todo[k::workers]]
    done, start, lock = [0], time.monotonic(), threading.Lock()

    def tick() -> None:
        with lock:
            done[0] += 1
            elapsed = time.monotonic() - start
            eta = elapsed / done[0] * (len(todo) - done[0])
            bar = "#" * (20 * done[0] // max(len(todo), 1))
            progress(
                f"\r[{bar:<20}] {done[0]}/{len(todo)} {assignment}  {elapsed:.0f}s elapsed, ETA {eta:.0f}s",
                end="",
            )

    with (
        tempfile.TemporaryDirectory(prefix="course-grade-") as tmp,
        ThreadPoolExecutor(len(shards) or 1) as pool,
    ):
        futures = [
            pool.submit(
                _run_shard,
                root,
                assignment,
                shard,
                _shard(root, assignment, shard, k, Path(tmp)),
                timeout,
                cell_timeout,
                tick,
                env,
            )
            for k, shard in enumerate(shards)
        ]
        for future in futures:
            results += future.result().values()
    if todo:
        progress("")
    return sorted(results, key=lambda r: r.student)


@contextlib.contextmanager
def kernels(warm: bool = True, progress=print):
    """The nbgrader processes' environment, with a zygote for warm kernels if asked.

    Yields the env to pass to :func:`grade`. With ``warm``, one process imports
    torch, transformers and the course and loads the model, and every grading
    kernel is forked from it (:mod:`course.grading.warm`); if it cannot start,
    grading goes on with ordinary kernels and says so.
    """
    env = _env()
    if not warm:
        yield env
        return
    with tempfile.TemporaryDirectory(prefix="course-warm-") as tmp:
        zygote, warm_env = warm_kernels.start(Path(tmp), env)
        try:
            if warm_kernels.wait_ready(zygote, warm_env):
                yield warm_env
            else:
                progress("warm kernels did not start; grading with ordinary kernels")
                yield env
        finally:
            warm_kernels.stop(zygote)


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


def write_log(results: list[Result], folder: Path) -> Path:
    """``folder/grading.csv``: student, assignment, status, seconds, reasons."""
    import csv

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "grading.csv"
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["student", "assignment", "status", "seconds", "reasons"])
        for r in results:
            row = [r.student, r.assignment, r.status, f"{r.seconds:.1f}"]
            out.writerow(row + ["; ".join(r.reasons)])
    return path


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
