"""The zygote: a process that has imported torch, transformers, nbgrader and the
course and loaded the model, and forks a grading kernel or a task's nbgrader on
request (:mod:`course.grading.kernel.warm` asks).

A request on its Unix socket is a header of :data:`HEADER` bytes (JSON: ``kind``,
``"kernel"`` or ``"nbgrader"``) with the asker's stdin, stdout and stderr attached,
then a line of JSON (``argv``, ``cwd``, ``env``; for a kernel ``box``, its box,
and ``launch``, its :class:`course.grading.kernel.launch.Launch`).
The zygote reads only the header and forks: the line, which may hold the
gradebook's URL, is read by the child alone, so no later kernel forked from the
zygote finds it in memory. The child takes those streams, the cwd and the
environment, starts its own session and box, and exits when the asker's end of the
connection closes, however the asker ended. A sandboxed kernel
(:func:`course.grading.kernel.sandbox.enter`) is a keeper outside and the kernel inside.
The zygote answers with the child's pid (a line); an nbgrader child sends its exit
code (a line) as it exits.

    python -m course.grading.kernel.zygote SOCKET_PATH [CLASS ...]

The classes (``module.Class``) are the course's autograde preprocessors, which
every nbgrader forked here loads: their modules are imported before the first
fork (the grader's run reads them from ``nbgrader_config.py``).
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import signal
import socket
import sys
import threading

from .. import nbgrader_app
from ..lean import import_jsonschema_lean
from . import contain, sandbox
from .launch import Launch, become_kernel, run_kernel

HEADER = 64  # bytes of a request's header, padded with spaces


def ask(conn: socket.socket, kind: str, request: dict, *, fds: list[int]) -> None:
    """Send a request (the asker's side): the header with ``fds``, then the line."""
    header = json.dumps({"kind": kind}).encode().ljust(HEADER)
    socket.send_fds(conn, [header], fds)
    conn.sendall(json.dumps(request).encode() + b"\n")


def _preload(classes: tuple[str, ...]) -> None:
    """Import what every notebook imports; load what every notebook loads; import
    the modules of ``classes``, the preprocessors every nbgrader forked here runs."""
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
    from course.checks import warm

    for module in pkgutil.iter_modules(checks.__path__):  # every notebook's checks
        importlib.import_module(f"{checks.__name__}.{module.name}")
    models.load()
    warm.warm_up()  # the oracle model, its neuron view and its visible cases
    # What an nbgrader process forked from here needs: the app and its steps, the
    # gradebook's mappers configured and nbformat's validators compiled (0.3 s of
    # every task when each nbgrader did it for itself).
    import nbgrader.api  # noqa: F401
    import nbgrader.apps.nbgraderapp  # noqa: F401
    from nbformat import v4, validator
    from sqlalchemy.orm import configure_mappers

    configure_mappers()
    for relax in (False, True):
        validator.get_validator(4, v4.nbformat_minor, relax_add_props=relax)
    for name in classes:
        importlib.import_module(name.rpartition(".")[0])

    sandbox.available()  # asked once here: every nbgrader forked knows the answer


def _take_over(
    conn: socket.socket, request: dict, *, fds: list[int], last=None
) -> None:
    """In the forked child: the asker's streams, cwd and env; exit when the asker
    goes (after calling ``last``, if given)."""
    _take_streams(request, fds)
    os.chdir(request["cwd"])

    def exit_with_asker() -> None:
        conn.recv(1)  # returns when the asker is gone, however it ended
        if last is not None:
            last()
        os._exit(1)

    threading.Thread(target=exit_with_asker, daemon=True).start()


def _take_streams(request: dict, fds: list[int]) -> None:
    """The asker's streams and environment, in a session of the child's own."""
    os.setsid()  # its own process group: killpg from student code reaches only it
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])


def _become_nbgrader(conn: socket.socket, request: dict, fds: list[int]) -> None:
    """In the forked child: run ``nbgrader ARGV`` with everything already imported."""

    def last() -> None:  # stopped from outside: its kernels, and all they started
        contain.close_all()
        os.killpg(0, signal.SIGKILL)

    _take_over(conn, request, fds=fds, last=last)
    contain.join_task_box(request["env"])
    from nbgrader.apps.nbgraderapp import NbGraderApp

    code = 0
    try:
        NbGraderApp.launch_instance(argv=nbgrader_app.arguments(request["argv"]))
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else 1
    sys.stdout.flush()
    sys.stderr.flush()
    conn.sendall(f"{code}\n".encode())
    os._exit(code)


def _become_kernel(conn: socket.socket, request: dict, fds: list[int]) -> None:
    """In the forked child: take the proxy's streams, cwd and env, and become the
    kernel its :class:`~course.grading.kernel.launch.Launch` describes."""
    launch = Launch.from_env(request["launch"])
    if launch.sandboxed:  # one thread (it unshares); its keeper watches the proxy
        _take_streams(request, fds)
    else:
        _take_over(conn, request, fds=fds)
    sys.path[0] = request["cwd"]
    argv = become_kernel(
        launch,
        argv=request["argv"],
        cwd=request["cwd"],
        box=request["box"],
        asker=conn if launch.sandboxed else None,
    )
    if launch.sandboxed:
        conn.detach()  # closed in the sandbox: its number may be reused
    run_kernel(argv, forked=True)


def serve(path: str, *, preload: tuple[str, ...] = ()) -> None:
    """Preload (``preload``: the preprocessor classes nbgrader will run), then fork
    a kernel or an nbgrader per request on socket ``path``."""
    _preload(preload)
    signal.signal(signal.SIGCHLD, lambda *_: _reap())
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path + ".tmp")
    os.rename(path + ".tmp", path)  # clients see the socket only once it listens
    server.listen(64)
    while True:
        conn, _ = server.accept()
        header, fds, _, _ = socket.recv_fds(conn, HEADER, 3)
        if len(header) != HEADER or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            conn.close()
            continue
        kind = json.loads(header)["kind"]
        pid = os.fork()
        if pid == 0:
            server.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            with conn.makefile("rb", buffering=0) as lines:
                request = json.loads(lines.readline())
            if kind == "nbgrader":
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


if __name__ == "__main__":
    serve(sys.argv[1], preload=tuple(sys.stdin.read().split()))
