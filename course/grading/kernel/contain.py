"""Keep a grading kernel, and everything it starts, inside its notebook.

Student code can fork, ``setsid``, double-fork or hold the kernel's output pipes
open; none of that may outlive the notebook or slow the next one. Each kernel gets
a *box*, made by :func:`open_box` before the kernel starts and emptied by
:func:`close_box` when its notebook ends (or its kernel is restarted):

* **A pids cgroup** where the machine offers one (Linux, root; cgroup v1 ``pids``
  or v2): every process the kernel starts stays in it whatever it does to its
  parentage, ``pids.max`` caps how many there are, and closing the box kills every
  process in it.
* **Otherwise** the box is a marker in the environment (``COURSE_KERNEL_BOX``):
  closing it kills the kernel's process tree and every process that carries the
  marker. A process that clears its environment and leaves the tree escapes this
  fallback; the README says so. ``RLIMIT_NPROC`` caps processes for non-root
  users, above what the user already runs (the limit counts all their threads).

:func:`enter_box` is what the kernel side calls on itself (the warm-kernel proxy
or the forked kernel): join the cgroup and, as root, leave the network.

A grading *task* (one submission, :mod:`course.grading.run.engine`) gets a box too,
named after its worker (pid and start time, so that a reused pid is not taken for
it) and its grading run: nbgrader runs in it, and every kernel box opened while it
runs is made inside it, so closing the task's box ends everything the submission
started, :func:`sweep_orphans` can end what a dead worker left, and
:func:`close_run` what a run left anywhere when it ends.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import time
import uuid
from pathlib import Path

from .procs import descendants, running, started, user_threads

BOX_ENV = "COURSE_KERNEL_BOX"  # the box's id (and its cgroup's folder, if any)
CGROUP_ENV = "COURSE_KERNEL_CGROUP"
TASK_CGROUP_ENV = "COURSE_TASK_CGROUP"  # kernel boxes are made inside this one
NO_NET_ENV = "COURSE_KERNEL_NO_NETWORK"
BOX_KEYS = (BOX_ENV, CGROUP_ENV, NO_NET_ENV)  # what puts a process in its box
CGROUP_ROOTS = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified", "/sys/fs/cgroup")
CLONE_NEWNET = 0x40000000


def _cgroup_root() -> Path | None:
    """A cgroup folder whose children get ``pids.max`` (v1 ``pids`` or v2), if any."""
    global _ROOT
    if _ROOT is None:
        _ROOT = next((r for r in map(Path, CGROUP_ROOTS) if _has_pids(r)), False)
    return _ROOT or None


def _has_pids(root: Path) -> bool:
    probe = root / f"course-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError:
        return False
    try:
        return (probe / "pids.max").exists()
    finally:
        probe.rmdir()


_ROOT: Path | bool | None = None
_open: dict[str, dict] = {}  # boxes this process made and has not closed yet


def open_box(max_processes: int | str = 64, prefix: str = "course") -> dict[str, str]:
    """Make a box; return the environment variables that put a kernel in it.

    Inside a task's box (``COURSE_TASK_CGROUP`` set) the cgroup is made in it.
    """
    box = f"{prefix}-{uuid.uuid4().hex[:12]}"
    env = {BOX_ENV: box}
    _open[box] = env
    root = _cgroup_root()
    parent = os.environ.get(TASK_CGROUP_ENV)
    if parent and Path(parent).is_dir():
        root = Path(parent)
    if root is not None:
        path = root / box
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(max_processes))
            env[CGROUP_ENV] = str(path)
        except OSError:
            pass
    return env


def open_task_box(run: str = "run") -> dict[str, str]:
    """A box for one task of grading run ``run``, named after this (worker) process.

    Returns the environment for the task's nbgrader process: it joins the box
    (:func:`enter_box`) and makes its kernels' boxes inside it.
    """
    owner = f"{os.getpid()}.{started(os.getpid())}"
    env = open_box("max", prefix=f"course-task-{owner}-{run}")
    if CGROUP_ENV in env:
        env[TASK_CGROUP_ENV] = env[CGROUP_ENV]
    return env


def sweep_orphans() -> int:
    """Close the task boxes of workers that died; return how many processes died.

    A worker killed mid-task cannot close its task's box; the next worker started
    on the machine calls this.
    """
    root, killed = _cgroup_root(), 0
    for path in root.glob("course-task-*") if root else []:
        pid, _, start = path.name.split("-")[2].partition(".")
        if not running(int(pid)) or (start and started(int(pid)) != int(start)):
            killed += close_box({BOX_ENV: path.name, CGROUP_ENV: str(path)})
    return killed


def close_run(run: str) -> int:
    """Close every task box of grading run ``run`` on this machine; return how many
    processes died. When a run ends none of its tasks may still run: one the
    scheduler started twice (its first worker taken for dead) ends here too."""
    root, killed = _cgroup_root(), 0
    for path in root.glob(f"course-task-*-{run}-*") if root else []:
        killed += close_box({BOX_ENV: path.name, CGROUP_ENV: str(path)})
    return killed


def join_task_box(env: dict | os._Environ = os.environ) -> None:
    """Put the calling process (a task's nbgrader) into its task's cgroup, if any."""
    _join(env.get(TASK_CGROUP_ENV))


def _join(path: str | None) -> None:
    if path:
        try:
            Path(path, "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            pass


def enter_box(env: dict | os._Environ = os.environ, max_processes: int = 64) -> None:
    """Put the calling process (and so all it starts) into the box named in ``env``."""
    path = env.get(CGROUP_ENV)
    if path:
        _join(path)
    elif os.geteuid() != 0:
        # RLIMIT_NPROC counts every thread of the user (the grader's workers, the
        # other kernels, a Jupyter server), so the cap is what runs now plus room.
        cap = user_threads() + 4 * max_processes
        resource.setrlimit(resource.RLIMIT_NPROC, (cap, cap))
    if env.get(NO_NET_ENV) == "1" and os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.unshare(CLONE_NEWNET)  # a new, empty network namespace: no network


def members(env: dict) -> set[int]:
    """Processes in the box: the cgroup's, or those carrying its marker."""
    path = env.get(CGROUP_ENV)
    if path:
        found = set()
        for folder, _, _ in os.walk(path):  # the box and the boxes made inside it
            try:
                found |= {
                    int(p) for p in Path(folder, "cgroup.procs").read_text().split()
                }
            except OSError:
                continue
        return found
    marker = f"{BOX_ENV}={env[BOX_ENV]}".encode()
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.add(int(entry.name))
            except OSError:
                continue
    return found


def close_box(env: dict, kernel_pid: int | None = None, seconds: float = 5) -> int:
    """Kill every process in the box (and below ``kernel_pid``); remove the cgroup
    (a kernel's, inside a task's box, is left for the task's box to remove while
    its killed processes still exit).

    Returns how many running processes were killed. Nothing is reaped here: a
    caller's own child keeps its exit status for the caller's ``wait``.
    """
    _open.pop(env.get(BOX_ENV, ""), None)
    killed, deadline = set(), time.monotonic() + seconds
    for pause in _pauses(deadline):
        found = members(env) | (descendants(kernel_pid) if kernel_pid else set())
        alive = {pid for pid in found - {os.getpid()} if running(pid)}
        if not alive:
            break
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(pause)
    path = env.get(CGROUP_ENV)
    if path:
        # A killed kernel takes ~30 ms to exit: no need to wait inside a task.
        parent = os.environ.get(TASK_CGROUP_ENV)
        nested = bool(parent) and Path(path).parent == Path(parent)
        inner = [folder for folder, _, _ in os.walk(path, topdown=False)]
        for folder in inner:  # the boxes inside first
            _remove(folder, time.monotonic() if nested else deadline + seconds)
    return len(killed)


def _remove(folder: str, deadline: float) -> None:
    """Remove a cgroup once the processes killed in it have finished exiting (and,
    under cgroup v1, been reaped: a task's nbgrader is a zombie for a moment)."""
    for pause in _pauses(deadline):
        try:
            os.rmdir(folder)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(pause)


def _pauses(deadline: float):
    """Waits of 1 ms, doubling up to 50 ms, until ``deadline`` (at least one): what
    is waited for usually takes a few ms, and a fixed 50 ms was a tenth of a small
    task."""
    pause = 0.001
    while True:
        yield pause
        if time.monotonic() >= deadline:
            return
        pause = min(2 * pause, 0.05)


def die_with_parent() -> None:
    """Have the kernel SIGKILL the calling process when its parent dies (Linux).

    For ``preexec_fn``: a worker killed with SIGKILL takes its zygote and its
    task's nbgrader with it.
    """
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def close_all() -> None:
    """Close every box this process still has open (it is about to die)."""
    for env in list(_open.values()):
        close_box(env)
