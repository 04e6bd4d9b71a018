"""What runs inside a sandbox (:mod:`course.grading.kernel.sandbox`): its init, the
kernel's first steps, and the seal of the kernel's IPC folder.

The init (pid 1 of the sandbox's PID namespace) forks the kernel, which drops every
privilege before it runs anything. ipykernel then binds its five sockets in the IPC
folder, the one folder of the grader's disk the kernel may write to; before the
kernel runs a line of the notebook it asks the init (:func:`seal`), which remounts
that folder read-only in the sandbox, drops its own privileges and answers.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from dataclasses import dataclass

from . import lockdown, mounts

SEAL_ENV = "COURSE_SANDBOX_SEAL"  # the kernel's ends of its seal pipes: "ask,answer"
SEAL_TIMEOUT = 300  # seconds a kernel has to bind its sockets


@dataclass(frozen=True)
class Policy:
    """What one kernel may use, and the one home of each limit's default: bytes of
    address space per process (0: no cap);
    bytes of memory for the whole sandbox, its processes and its tmpfs folders
    together (as root, a memory cgroup; 0: ``memory``); CPU seconds, bytes per file
    and per writable folder, files (and folders) per writable folder, processes;
    ``hidden`` names folders (the course's) that no read-only path may contain."""

    memory: int = 4 << 30
    ram: int = 0
    cpu_seconds: int = 1800
    file_size: int = 256 << 20
    scratch: int = 256 << 20
    files: int = 16384
    processes: int = 64
    hidden: tuple[str, ...] = ()


def init(staging: str, policy: Policy, *, uid: int | None, ipc: str | None) -> None:
    """Pid 1 of the sandbox: finish its file system, fork the kernel (which drops
    every privilege and returns), seal the IPC folder once the kernel's sockets are
    in it (:func:`seal`), drop every privilege and reap until the kernel exits."""
    lockdown.die_with_parent()
    mounts.enter_root(staging)
    os.closerange(3, 65536)
    # The kernel talks over ZeroMQ; what it writes to its raw streams would fill
    # the grader's log pipe: none of that leaves the sandbox.
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    # The seal's pipes (an IPC folder only): the kernel asks, the init answers.
    asks, answers = (os.pipe(), os.pipe()) if ipc else (None, None)
    kernel = os.fork()
    if kernel == 0:
        if ipc:
            os.close(asks[0])
            os.close(answers[1])
        _become_kernel(policy, uid=uid, ends=(asks[1], answers[0]) if ipc else None)
        return
    lockdown.set_dumpable(False)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda s, _: _signal(kernel, s))
    sealed = False
    if ipc:
        sealed = _await_seal(asks[0], ipc, kernel)
        for fd in (*asks, answers[0]):
            os.close(fd)
    lockdown.drop_privileges(uid, uid)
    lockdown.die_with_parent()  # a change of uid cleared it
    lockdown.set_dumpable(False)
    if os.getppid() == 1:  # the keeper is already gone
        os._exit(1)
    if ipc:
        if sealed:
            os.write(answers[1], b"k")
        os.close(answers[1])
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(1)
        if pid == kernel:
            os._exit(max(0, os.waitstatus_to_exitcode(status)))


def _become_kernel(
    policy: Policy, *, uid: int | None, ends: tuple[int, int] | None
) -> None:
    """In the kernel, before any of its code: no privilege, its limits, and the
    ends of the seal's pipes for :func:`seal` (``None``: nothing to seal)."""
    lockdown.drop_privileges(uid, uid)
    lockdown.set_dumpable(True)  # the kernel's /proc is its own; init's is not
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    lockdown.limit(
        memory=policy.memory,
        cpu_seconds=policy.cpu_seconds,
        file_size=policy.file_size,
        # A slot uid owns nothing else; inside an unprivileged grader's own user
        # namespace, Linux 5.14+ counts only the sandbox's processes.
        processes=policy.processes
        if uid is not None or lockdown.processes_counted_per_namespace()
        else None,
    )
    if ends is not None:
        for fd in ends:
            os.set_inheritable(fd, True)  # a cold kernel execs ipykernel
        os.environ[SEAL_ENV] = f"{ends[0]},{ends[1]}"


def _await_seal(asks: int, ipc: str, kernel: int) -> bool:
    """In the init: wait for the kernel's word that its sockets are bound, then make
    its IPC folder read-only. ``False`` (the kernel is killed) if no word comes."""
    ready, _, _ = select.select([asks], [], [], SEAL_TIMEOUT)
    if ready and os.read(asks, 1) == b"s":
        mounts.seal(ipc)
        return True
    _signal(kernel, signal.SIGKILL)
    return False


def seal(sockets: list[str], *, timeout: float = 30) -> None:
    """In a sandboxed kernel, once ipykernel has bound ``sockets`` (their paths) and
    before it runs any code: have the init make the IPC folder read-only, so that
    nothing the kernel runs can add a file to the grader's disk. Does nothing
    outside a sandbox; ends the kernel if the init does not answer."""
    ends = os.environ.pop(SEAL_ENV, None)
    if not ends:
        return
    ask, answer = map(int, ends.split(","))
    deadline = time.monotonic() + timeout
    while not all(os.path.exists(path) for path in sockets):
        if time.monotonic() > deadline:
            os._exit(1)
        time.sleep(0.002)  # the heartbeat binds in a thread of its own
    os.write(ask, b"s")
    if os.read(answer, 1) != b"k":
        os._exit(1)
    os.close(ask)
    os.close(answer)


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
