"""A grading kernel in a sandbox of its own: it can compute, and nothing else.

:func:`enter` turns the calling process (a kernel forked from the warm zygote, or
the kernel command itself) into three:

* **the keeper** (the caller; stays outside): it holds the kernel's slot, passes
  interrupts on, and kills the sandbox when whoever asked for the kernel is gone;
* **the sandbox's init** (pid 1 of a new PID namespace): it reaps, passes signals
  on, and when it exits every process in the sandbox dies with it;
* **the kernel** (returned into): an unprivileged user (as root, a uid of its own
  per running kernel, :data:`SLOT_UID`; otherwise the user of a user namespace)
  with no capabilities, ``no_new_privs`` and a seccomp filter
  (:mod:`course.grading.kernel.lockdown`), in its own PID, mount, network (loopback
  only), IPC, UTS and cgroup namespaces.

Its file system is built afresh: read-only the system's programs and libraries,
the Python runtime, its site-packages and the ``course`` package
(:func:`readonly_paths`); writable and private a home, ``/tmp``, ``/dev/shm`` and
its working folder (a copy of the notebook folder's other files), each a size-capped
tmpfs that goes away with it; the kernel's own IPC socket folder. Nothing else of
the machine: no course folder, gradebook, exchange, other student, other kernel,
grader's home or grader's process. Its environment is
:func:`course.grading.kernel_env`.

``python -m course.grading.kernel.sandbox`` checks that this machine can do all of that
(:func:`probe`).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

from ...i18n import say
from ..environment import HOME
from . import inside, mounts
from .inside import Policy

ENV = "COURSE_SANDBOX"  # the kernel's Policy, as JSON: set by GuardedExecute
SLOT_UID = 2_000_000_000  # as root, the kernel of slot N runs as SLOT_UID + N
SLOTS = 1024
MEMORY_CGROUP = Path("/sys/fs/cgroup/memory/course-sandbox")  # cgroup v1, as root
INNER_UID = 1000  # the kernel's uid inside a user namespace (not root)
CONNECTION = "/run/connection.json"
CLONE = {"NS": 0x20000, "CGROUP": 0x2000000, "UTS": 0x4000000, "IPC": 0x8000000,
         "USER": 0x10000000, "PID": 0x20000000, "NET": 0x40000000}  # fmt: skip


def readonly_paths(hidden: tuple[str, ...] = ()) -> list[str]:
    """The Python runtime, its site-packages and the ``course`` package: what a
    kernel reads, and all it reads beyond the system's own folders."""
    import course

    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    found |= {p for p in sys.path if p.endswith(("site-packages", "dist-packages"))}
    found.add(str(Path(course.__file__).resolve().parent))
    paths = sorted(str(Path(p).resolve()) for p in found if p and Path(p).is_dir())
    for path in paths:
        for secret in map(lambda s: str(Path(s).resolve()), hidden):
            if secret == path or secret.startswith(path.rstrip("/") + "/"):
                raise RuntimeError(f"{path} would show the course folder {secret}")
    return [p for p in paths if not any(p.startswith(q + "/") for q in paths)]


def enter(policy: Policy, *, argv: list[str], cwd: str, asker=None) -> list[str]:
    """Put the calling (single-threaded) process's kernel into a sandbox.

    Returns, in the kernel only, ``argv`` with its connection file (``-f``) the
    sandbox's copy. The caller stays outside as the keeper and never returns: it
    exits with the sandbox, or kills it when ``asker`` (a socket) closes.
    """
    connection = _connection(argv)
    ipc = None
    if connection:
        info = json.loads(Path(connection).read_text())
        ipc = str(Path(info["ip"]).parent) if info.get("transport") == "ipc" else None
    root = os.geteuid() == 0
    slot, uid = _take_slot() if root else (None, INNER_UID)
    if root and ipc:
        os.chown(ipc, uid, uid)
    if root:
        _cap_memory(uid - SLOT_UID, policy.ram or policy.memory)
    staging = _staging()
    outer = os.geteuid(), os.getegid()
    _unshare(
        *(["USER"] if not root else []), "NS", "NET", "IPC", "UTS", "PID", "CGROUP"
    )
    if not root:
        mounts.map_user(INNER_UID, *outer)
    mounts.build(
        staging,
        readonly=readonly_paths((*policy.hidden, cwd)),
        scratch=[HOME, "/tmp", "/dev/shm"],
        ipc=ipc,
        cwd=cwd,
        files={CONNECTION: Path(connection).read_bytes() if connection else b""},
        uid=uid,
        size=policy.scratch,
        inodes=policy.files,
    )
    mounts.loopback_up()
    child = os.fork()
    if child:
        _keep(child, asker, slot)
    inside.init(staging, policy, uid=uid if root else None, ipc=ipc)
    os.chdir(cwd)
    return [CONNECTION if a == connection else a for a in argv]


def _connection(argv: list[str]) -> str | None:
    for flag, value in zip(argv, argv[1:], strict=False):
        if flag == "-f":
            return value
    return None


def _take_slot() -> tuple[int, int]:
    """A free slot (its lock held while the kernel runs) and its uid."""
    try:
        folder = Path("/run/course-sandbox")
        folder.mkdir(mode=0o700, exist_ok=True)
    except OSError:  # no writable /run: a folder of root's own under /tmp
        folder = _own_folder(Path("/tmp/course-sandbox-slots"))
    for n in range(SLOTS):
        fd = os.open(folder / f"slot-{n}", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd, SLOT_UID + n
        except BlockingIOError:
            os.close(fd)
    raise RuntimeError(f"all {SLOTS} sandbox slots are taken")


def _cap_memory(slot: int, limit: int) -> None:
    """As root, where cgroup v1's memory controller is mounted: the calling process,
    and so the whole sandbox, joins its slot's memory cgroup, capped at ``limit``
    bytes (0: no cap). What the sandbox's tmpfs folders hold counts there too."""
    group = MEMORY_CGROUP / f"slot-{slot}"
    if not limit or not MEMORY_CGROUP.parent.is_dir():
        return
    group.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):  # what the slot's last sandbox left charged
        (group / "memory.force_empty").write_text("0")
    (group / "memory.limit_in_bytes").write_text(str(limit))
    (group / "cgroup.procs").write_text(str(os.getpid()))


def _staging() -> str:
    """An empty folder of this user's, where each sandbox mounts its root privately."""
    return str(_own_folder(Path(f"/tmp/course-sandbox-{os.geteuid()}")))


def _own_folder(path: Path) -> Path:
    """``path``, made if need be: a folder (no link) that this user owns."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    info = path.lstat()
    if not path.is_dir() or path.is_symlink() or info.st_uid != os.geteuid():
        raise RuntimeError(f"{path} is not a folder of this user's")
    return path


def _unshare(*names: str) -> None:
    flags = 0
    for name in names:
        flags |= CLONE[name]
    if mounts.libc.unshare(flags) != 0:  # os.unshare is Python 3.12's
        err = ctypes.get_errno()
        raise OSError(err, f"unshare {' '.join(names)}: {os.strerror(err)}")


def _keep(child: int, asker, slot: int | None) -> None:
    """The keeper: pass interrupts on; exit with the sandbox, or end it when the
    asker is gone (and with it the slot's lock)."""

    def forward(signum, _frame) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum if signum == signal.SIGINT else signal.SIGKILL)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    done = os.pidfd_open(child)
    watched = [done] + ([asker] if asker is not None else [])
    while done not in select.select(watched, [], [])[0]:
        with contextlib.suppress(OSError):
            if asker.recv(1):  # the asker says nothing: anything else is ignored
                continue
        watched = [done]  # the asker is gone: so is the sandbox
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
    _, status = os.waitpid(child, 0)
    os._exit(max(0, os.waitstatus_to_exitcode(status)))


def refusal(reason: str) -> str:
    """Why kernels cannot be sandboxed here, and how to change that (a sentence)."""
    return say(
        "Kernels cannot be sandboxed on this machine ({reason}). Grade "
        "as root, or enable unprivileged user namespaces "
        "(sysctl kernel.unprivileged_userns_clone=1 and "
        "user.max_user_namespaces > 0), or choose to grade without a "
        "sandbox (course grade --no-sandbox, "
        "--GuardedExecute.sandbox=off).",
        reason=reason,
    )


_PROBED: list[str | None] = []


def available() -> str | None:
    """:func:`probe`, once per process (a zygote's forks inherit the answer)."""
    if not _PROBED:
        _PROBED.append(probe())
    return _PROBED[0]


def probe(timeout: float = 60) -> str | None:
    """``None`` if this machine can sandbox a kernel, else why not (a sentence)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="course-probe-") as cwd:
        proc = subprocess.run(
            [sys.executable, "-m", "course.grading.kernel.sandbox"],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
        )
    if proc.returncode == 0 and proc.stdout.strip() == "sandboxed":
        return None
    lines = (proc.stderr or proc.stdout).strip().splitlines() or ["no reason given"]
    return lines[-1]


def _self_test() -> None:
    """Make a sandbox in a child and look inside; print ``sandboxed`` if it is one
    (run by :func:`probe`). The sandbox's own streams lead nowhere: its verdict is
    its exit status."""
    child = os.fork()
    if child == 0:
        try:
            enter(Policy(), argv=[], cwd=os.getcwd())
        except (OSError, RuntimeError) as err:
            print(f"{type(err).__name__}: {err}", file=sys.stderr, flush=True)
            os._exit(1)
        status = Path("/proc/self/status").read_text()
        caps = next(ln for ln in status.splitlines() if ln.startswith("CapEff"))
        os._exit(0 if os.getpid() == 2 and int(caps.split()[1], 16) == 0 else 3)
    code = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
    if code == 3:
        sys.exit("a sandbox was made, but its kernel was not confined")
    if code:
        sys.exit(code)
    print("sandboxed", flush=True)


if __name__ == "__main__":
    _self_test()
