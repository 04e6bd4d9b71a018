"""Warm kernels: fork each grading kernel from a process that has already imported
torch, transformers and the course, and loaded the model.

A fresh kernel spends about 4 s importing torch and transformers and loading the
model before the first cell of a notebook does anything; for a class that is most of
the grading time. ``python -m course grade`` therefore starts one *zygote*
(:mod:`course.grading.kernel.zygote`) that pays that once, and registers a kernelspec
``course-warm`` whose command is this module's proxy (:func:`proxy`). When nbgrader
starts a kernel, the proxy asks the zygote to fork a child that becomes the kernel
(same connection file, cwd, environment, standard streams), forwards interrupts to
it, and exits when it exits. The child exits when the proxy is killed. Each child is
its own process, so nothing one student's code does reaches another's; what it
inherits is what a fresh kernel would build itself (imports, the model), and it
draws fresh random seeds (torch, numpy, random) as a new process does. A task's
nbgrader is forked from it too (:func:`nbgrader`), by the worker itself: no
interpreter starts for it.

Without a zygote (``COURSE_WARM_SOCKET`` unset or gone) the proxy becomes the kernel
itself, cold. Either way the kernel is started by the same
:func:`course.grading.kernel.launch.become_kernel` and
:func:`~course.grading.kernel.launch.run_kernel`, from the same
:class:`~course.grading.kernel.launch.Launch`.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from ..environment import public_env
from . import contain, zygote
from .launch import ENV, Launch, become_kernel, run_kernel

SOCKET_ENV = "COURSE_WARM_SOCKET"
KERNEL = "course-warm"


def proxy(argv: list[str]) -> None:
    """The kernel command: have the zygote fork the kernel, or become one."""
    launch = Launch.from_env(os.environ.get(ENV))
    box = {k: v for k, v in os.environ.items() if k in contain.BOX_KEYS}
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(os.environ.get(SOCKET_ENV) or "")
    except OSError:  # no zygote: a cold kernel
        conn.close()
        argv = become_kernel(launch, argv=argv, cwd=os.getcwd(), box=box)
        run_kernel(argv, forked=False)
    contain.enter_box(box)  # the proxy too: it goes with the kernel's box
    env = launch.environment(os.environ)
    env.pop(SOCKET_ENV, None)  # a kernel forks nothing from the zygote
    request = {"argv": argv, "cwd": os.getcwd(), "env": env, "box": box}
    zygote.ask(conn, "kernel", {**request, "launch": launch.to_env()}, fds=[0, 1, 2])
    pid = int(conn.recv(32))
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _: _forward(pid, signum))
    try:
        done = os.pidfd_open(pid)
    except ProcessLookupError:
        sys.exit(1)
    select.select([done], [], [])
    sys.exit(0)


def nbgrader(
    argv: list[str], *, cwd: str, env: dict, timeout: float
) -> tuple[str, int, int, bool] | None:
    """``nbgrader ARGV`` forked from the zygote that ``env`` names, from this process.

    Returns its output, exit code and pid, and whether it finished within
    ``timeout`` seconds (if not, its process group is killed; the caller closes
    its box). ``None`` if there is no zygote to ask. It ends, with its kernels,
    when this process closes the connection, however this process ends.
    """
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(env.get(SOCKET_ENV) or "")
    except OSError:
        conn.close()
        return None
    read, write = os.pipe()
    with conn, conn.makefile("rb") as replies, open(read, "rb", buffering=0) as out:
        request = {"argv": argv, "cwd": cwd, "env": env}
        with open(os.devnull, "rb") as null:
            try:
                zygote.ask(conn, "nbgrader", request, fds=[null.fileno(), write, write])
            except OSError:  # the zygote is gone
                return None
            finally:
                os.close(write)
        pid = replies.readline().strip()
        if not pid:  # the zygote is gone
            return None
        pid, code = int(pid), b""
        log, finished = _read_all(out, time.monotonic() + timeout)
        if finished:
            conn.settimeout(30)  # sent as it exits; a killed one sends none
            with contextlib.suppress(OSError):
                code = replies.readline().strip()
        else:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
    return log.decode(errors="replace"), int(code or -9), pid, finished


LOG_KEPT = 4 << 20  # bytes of a task's log kept from its start, and from its end


def _read_all(out, deadline: float) -> tuple[bytes, bool]:
    """What ``out`` gives until it closes (True) or ``deadline`` passes (False):
    its first and last :data:`LOG_KEPT` bytes, whatever a process floods it with."""
    head, tail = bytearray(), collections.deque()
    kept = 0
    while (left := deadline - time.monotonic()) > 0:
        if select.select([out], [], [], left)[0]:
            if not (data := out.read(1 << 16)):
                return _joined(head, tail), True
            if len(head) < LOG_KEPT:
                head += data
                continue
            tail.append(data)
            kept += len(data)
            while kept - len(tail[0]) >= LOG_KEPT:
                kept -= len(tail.popleft())
    return _joined(head, tail), False


def _joined(head: bytearray, tail) -> bytes:
    return bytes(head) + (b"\n[...]\n" if tail else b"") + b"".join(tail)


def _forward(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        sys.exit(1)
    if signum != signal.SIGINT:
        sys.exit(0)


def start(
    tmp: Path, env: dict, *, preload: tuple[str, ...] = ()
) -> tuple[subprocess.Popen, dict]:
    """Start a zygote under ``tmp``; return it and the env that makes kernels warm.

    ``preload``: the preprocessor classes (``module.Class``) of the nbgrader runs it
    will fork, whose modules it imports first. They go to its stdin, not its
    argv: a forked kernel keeps the zygote's command line, which every process in
    the kernel's namespace can read.

    The env puts the ``course-warm`` kernelspec on ``JUPYTER_PATH`` and names the
    zygote's socket; pass ``--Execute.kernel_name=course-warm`` to nbgrader.
    """
    spec = tmp / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [
        sys.executable,
        "-m",
        "course.grading.kernel.warm",
        "-f",
        "{connection_file}",
    ]
    kernel = {"argv": argv, "display_name": "Python 3 (warm)", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel))
    path = str(tmp / "zygote.sock")
    with open(tmp / "zygote.log", "wb") as log:
        zygote = subprocess.Popen(
            [sys.executable, "-m", "course.grading.kernel.zygote", path],
            env=public_env(env),  # kernels are forked from its memory
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=contain.die_with_parent,
        )
    zygote.stdin.write("\n".join(preload).encode())
    zygote.stdin.close()
    paths = [str(tmp), env.get("JUPYTER_PATH", "")]
    warm_env = {**env, SOCKET_ENV: path, "JUPYTER_PATH": os.pathsep.join(paths)}
    return zygote, warm_env


def wait_ready(zygote: subprocess.Popen, env: dict, timeout: float = 120) -> bool:
    """True once the zygote listens; False if it died or took too long."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and zygote.poll() is None:
        if os.path.exists(env[SOCKET_ENV]):
            return True
        time.sleep(0.1)
    return False


def stop(zygote: subprocess.Popen) -> None:
    """Stop the zygote (a kernel it forked exits with its proxy)."""
    zygote.kill()
    zygote.wait()


if __name__ == "__main__":
    proxy(sys.argv[1:])
