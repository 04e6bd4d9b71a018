"""Warm kernels: fork each grading kernel from a process that has already imported
torch, transformers and the course, and loaded the model.

A fresh kernel spends about 4 s importing torch and transformers and loading the
model before the first cell of a notebook does anything; for a class that is most of
the grading time. ``python -m course grade`` therefore starts one *zygote*
(:func:`serve`) that pays that once, and registers a kernelspec ``course-warm`` whose
command is this module's proxy (:func:`proxy`). When nbgrader starts a kernel, the
proxy asks the zygote to fork a child that becomes the kernel (same connection file,
cwd, environment, standard streams), forwards interrupts to it, and exits when it
exits. The child exits when the proxy is killed. Each child is its own process, so
nothing one student's code does reaches another's; what it inherits is what a fresh
kernel would build itself (imports, the model), and it draws fresh random seeds
(torch, numpy, random) as a new process does. A task's nbgrader is forked from it
too (:func:`nbgrader`), by the worker itself: no interpreter starts for it.

Without a zygote (``COURSE_WARM_SOCKET`` unset or gone) the proxy simply becomes an
ordinary ``ipykernel`` kernel.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import resource
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import contain

SOCKET_ENV = "COURSE_WARM_SOCKET"
MEMORY_ENV = "COURSE_KERNEL_MEMORY"  # bytes of address space for each kernel
KERNEL = "course-warm"


def _preload() -> None:
    """Import what every notebook imports; load what every notebook loads."""
    from course.grading import import_jsonschema_lean

    import_jsonschema_lean()
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    # What a kernel imports as it starts: debugpy alone was 0.2 s of each start;
    # IPython's debugger and completer, psutil, sqlite3 and tornado's loop 0.05 s.
    import sqlite3  # noqa: F401

    import ipykernel.debugger  # noqa: F401
    import ipykernel.ipkernel  # noqa: F401
    import ipykernel.kernelapp  # noqa: F401
    import IPython.core.completerlib  # noqa: F401
    import IPython.core.debugger  # noqa: F401
    import IPython.extensions.storemagic  # noqa: F401
    import matplotlib.pyplot  # noqa: F401
    import psutil  # noqa: F401
    import tornado.platform.asyncio  # noqa: F401

    from course import checks, models, viz  # noqa: F401
    from course.checks import (  # noqa: F401
        attention,
        config,
        heads,
        layer,
        oracles,
        outputs,
        pictures,
        positions,
        softmax,
        split,
        transformer,
    )

    models.load()
    oracles.sample_qk()  # the oracle model and its neuron view, built once here
    # What an nbgrader process forked from here needs: the app and the judge, the
    # gradebook's mappers configured and nbformat's validators compiled (0.3 s of
    # every task when each nbgrader did it for itself).
    import nbgrader.api  # noqa: F401
    import nbgrader.apps.nbgraderapp  # noqa: F401
    from nbformat import v4, validator
    from sqlalchemy.orm import configure_mappers

    configure_mappers()
    for relax in (False, True):
        validator.get_validator(4, v4.nbformat_minor, relax_add_props=relax)

    from course.grading import judge  # noqa: F401


def _take_over(conn: socket.socket, request: dict, fds: list[int], last=None) -> None:
    """In the forked child: the proxy's streams, cwd and env; exit with the proxy
    (after calling ``last``, if given)."""
    os.setsid()  # its own process group: killpg from student code reaches only it
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])

    def exit_with_proxy() -> None:
        conn.recv(1)  # returns when the proxy is gone, however it ended
        if last is not None:
            last()
        os._exit(1)

    threading.Thread(target=exit_with_proxy, daemon=True).start()


def _become_nbgrader(conn: socket.socket, request: dict, fds: list[int]) -> None:
    """In the forked child: run ``nbgrader ARGV`` with everything already imported."""

    def last() -> None:  # stopped from outside: its kernels, and all they started
        contain.close_all()
        os.killpg(0, signal.SIGKILL)

    _take_over(conn, request, fds, last)
    contain.join_task_box(request["env"])
    from nbgrader.apps.nbgraderapp import NbGraderApp

    code = 0
    try:
        NbGraderApp.launch_instance(argv=list(request["argv"]))
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else 1
    sys.stdout.flush()
    sys.stderr.flush()
    conn.sendall(f"{code}\n".encode())
    os._exit(code)


def _become_kernel(conn: socket.socket, request: dict, fds: list[int]) -> None:
    """In the forked child: take the proxy's streams, cwd and env, run ipykernel."""
    _take_over(conn, request, fds)
    contain.enter_box(request["env"])
    sys.path[0] = request["cwd"]
    if request.get("memory"):
        limit = int(request["memory"])
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import numpy
    import torch

    torch.seed()  # fresh, unpredictable seeds, as a new process has
    random.seed()
    numpy.random.seed()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from ipykernel.kernelapp import IPKernelApp

    argv = list(request["argv"])
    if os.environ.get("JPY_PARENT_PID"):  # read at import in a cold kernel
        argv.append(f"--IPKernelApp.parent_handle={os.environ['JPY_PARENT_PID']}")
    IPKernelApp.launch_instance(argv=argv)
    os._exit(0)


def serve(path: str) -> None:
    """The zygote: preload, then fork one kernel per request on socket ``path``."""
    _preload()
    signal.signal(signal.SIGCHLD, lambda *_: _reap())
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path + ".tmp")
    os.rename(path + ".tmp", path)  # clients see the socket only once it listens
    server.listen(64)
    while True:
        conn, _ = server.accept()
        data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        request = json.loads(data)
        pid = os.fork()
        if pid == 0:
            server.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            if request.get("nbgrader"):
                _become_nbgrader(conn, request, fds)
            _become_kernel(conn, request, fds)
        for fd in fds:
            os.close(fd)
        conn.sendall(f"{pid}\n".encode())
        conn.close()  # the child keeps its copy open until it exits


def _reap() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def proxy(argv: list[str]) -> None:
    """The kernel command: have the zygote fork the kernel, or become one."""
    path = os.environ.get(SOCKET_ENV)
    memory = os.environ.get(MEMORY_ENV)
    contain.enter_box(os.environ)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path or "")
    except OSError:
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (int(memory), int(memory)))
        os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *argv])
    env = dict(os.environ)
    env.pop(SOCKET_ENV)  # a kernel forks nothing from the zygote; nbgrader's kernels do
    request = {"argv": argv, "cwd": os.getcwd(), "env": env, "memory": memory}
    socket.send_fds(conn, [json.dumps(request).encode()], [0, 1, 2])
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
    with conn, open(read, "rb", buffering=0) as out, open(os.devnull, "rb") as null:
        request = {"argv": argv, "cwd": cwd, "env": env, "nbgrader": True}
        fds = [null.fileno(), write, write]
        socket.send_fds(conn, [json.dumps(request).encode()], fds)
        os.close(write)
        replies, code = conn.makefile("rb"), b""
        pid = int(replies.readline())
        log, finished = _read_all(out, time.monotonic() + timeout)
        if not finished:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        conn.settimeout(30)  # the code is sent as it exits; a killed one sends none
        with contextlib.suppress(OSError):
            code = replies.readline().strip() if finished else b""
    return log.decode(errors="replace"), int(code or -9), pid, finished


def _read_all(out, deadline: float) -> tuple[bytes, bool]:
    """What ``out`` gives until it closes (True) or ``deadline`` passes (False)."""
    chunks = []
    while (left := deadline - time.monotonic()) > 0:
        if select.select([out], [], [], left)[0]:
            if not (data := out.read(1 << 16)):
                return b"".join(chunks), True
            chunks.append(data)
    return b"".join(chunks), False


def _forward(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        sys.exit(1)
    if signum != signal.SIGINT:
        sys.exit(0)


def start(tmp: Path, env: dict) -> tuple[subprocess.Popen, dict]:
    """Start a zygote under ``tmp``; return it and the env that makes kernels warm.

    The env puts the ``course-warm`` kernelspec on ``JUPYTER_PATH`` and names the
    zygote's socket; pass ``--Execute.kernel_name=course-warm`` to nbgrader.
    """
    spec = tmp / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "course.grading.warm", "-f", "{connection_file}"]
    kernel = {"argv": argv, "display_name": "Python 3 (warm)", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel))
    path = str(tmp / "zygote.sock")
    with open(tmp / "zygote.log", "wb") as log:
        zygote = subprocess.Popen(
            [sys.executable, "-m", "course.grading.warm", "--serve", path],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=contain.die_with_parent,
        )
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
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2])
    else:
        proxy(sys.argv[1:])
