"""Real services for the tests and the bench, started and stopped by them.

* :func:`postgres`: Debian's PostgreSQL server (``make setup`` installs it), run by
  ``initdb`` and ``pg_ctl`` as the ``postgres`` user (they refuse root), on a free
  loopback port, fsync off; yields a SQLAlchemy URL of a fresh database.
* :func:`dask_cluster`: a ``dask scheduler`` and a ``dask worker`` with its own
  worker processes, started with their command-line programs on 127.0.0.1;
  yields the scheduler file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pg_bin() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not found:
        raise RuntimeError("PostgreSQL is missing: `make setup` installs it")
    return found[-1].parent


def _as_postgres(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    user = "postgres" if os.geteuid() == 0 else None
    return subprocess.run(cmd, user=user, check=True, capture_output=True, **kwargs)


@contextlib.contextmanager
def postgres(database: str = "course"):
    """A PostgreSQL server of its own; yields ``postgresql+psycopg://...`` of a new,
    empty database."""
    import psycopg

    bindir, port = _pg_bin(), free_port()
    home = Path(tempfile.mkdtemp(prefix="course-pg-"))  # /tmp: postgres can reach it
    if os.geteuid() == 0:
        shutil.chown(home, "postgres")
    data = home / "data"
    _as_postgres([bindir / "initdb", "-D", data, "-A", "trust", "-U", "postgres"])
    options = (
        f"-p {port} -k {home} -c listen_addresses=127.0.0.1 -c fsync=off "
        "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
    )
    start = [bindir / "pg_ctl", "-D", data, "-o", options, "-l", home / "log", "-w"]
    _as_postgres([*start, "start"])
    try:
        server = f"postgresql://postgres@127.0.0.1:{port}"
        with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {database}")
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/{database}"
    finally:
        _as_postgres([bindir / "pg_ctl", "-D", data, "-m", "immediate", "stop"])
        shutil.rmtree(home, ignore_errors=True)


@contextlib.contextmanager
def dask_cluster(folder: Path, workers: int = 2):
    """``dask scheduler`` and ``dask worker --nworkers N --nthreads 1`` on
    127.0.0.1; yields the scheduler file once all N workers are up."""
    from distributed import Client

    file = folder / "scheduler.json"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    common = ["--no-dashboard"]
    scheduler = subprocess.Popen(
        [BIN / "dask", "scheduler", "--host", "127.0.0.1", "--port", "0"]
        + ["--scheduler-file", file, *common],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(folder / "scheduler.log", "wb"),
        start_new_session=True,
    )
    worker = subprocess.Popen(
        [BIN / "dask", "worker", "--scheduler-file", file, "--host", "127.0.0.1"]
        + ["--nworkers", str(workers), "--nthreads", "1", "--memory-limit", "0"]
        + common,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(folder / "worker.log", "wb"),
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        with Client(scheduler_file=str(file), timeout=30) as client:
            client.wait_for_workers(workers, timeout=120)
        yield file
    finally:
        _stop(worker, scheduler)


def _stop(*procs: subprocess.Popen) -> None:
    """SIGTERM each process's group, then SIGKILL a group still there after 30 s."""
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 15)
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()


@contextlib.contextmanager
def unix_accounts(names: list[str], homes: Path, password: str):
    """Unix accounts of the machine (``useradd``, root only), removed afterwards;
    yields ``{name: home folder}``. Accounts of these names that a killed run left
    behind are removed first."""
    made = {}
    _remove_accounts(names)
    try:
        for name in names:
            home = homes / name
            subprocess.run(
                [
                    "useradd",
                    "--create-home",
                    "--home-dir",
                    home,
                    "--shell",
                    "/bin/bash",
                    name,
                ],  # fmt: skip
                check=True,
                capture_output=True,
            )
            made[name] = home
            subprocess.run(
                ["chpasswd"], input=f"{name}:{password}", text=True, check=True
            )
        yield made
    finally:
        _remove_accounts(list(made))


def can_read(user: str, path: Path) -> bool:
    """Whether the Unix account ``user`` can read the file ``path``."""
    runuser = shutil.which("runuser") or "/usr/sbin/runuser"
    proc = subprocess.run([runuser, "-u", user, "--", "cat", str(path)],
                          capture_output=True)  # fmt: skip
    return proc.returncode == 0


def _remove_accounts(names: list[str]) -> None:
    """End every process of these accounts and delete them (quietly if absent)."""
    for name in names:
        subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
        subprocess.run(["userdel", "--remove", name], capture_output=True)


@contextlib.contextmanager
def course_hub(folder: Path, env: dict[str, str]):
    """The course's JupyterHub (``hub/jupyterhub_config.py``) with its proxy, on free
    loopback ports; yields its URL once it answers."""
    port = free_port()
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "COURSE_HUB_PORT": str(port),
        "COURSE_HUB_API_PORT": str(free_port()),
        "COURSE_PROXY_API_PORT": str(free_port()),
        "COURSE_HUB_STATE": str(folder / "hub-state"),
        **env,
    }
    config = Path(__file__).parents[1] / "hub" / "jupyterhub_config.py"
    url = f"http://127.0.0.1:{port}"
    with serving(
        [BIN / "jupyterhub", "-f", config],
        probe=f"{url}/hub/api",
        log=folder / "hub.log",
        cwd=folder,
        env=env,
    ):
        yield url


@contextlib.contextmanager
def serving(cmd: list, *, probe: str, log: Path, seconds: float = 90, **popen):
    """Run a server ``cmd`` in a process group of its own; enter the block once the
    URL ``probe`` answers, and stop the group (its kernels too) when it ends."""
    import urllib.request

    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=open(log, "wb"),
        start_new_session=True,
        **popen,
    )
    try:
        deadline = time.monotonic() + seconds
        while True:
            try:
                urllib.request.urlopen(probe, timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{cmd[0]} did not start: see {log}") from None
                time.sleep(0.3)
        yield proc
    finally:
        _stop(proc)


@contextlib.contextmanager
def reachable_by_all(*paths: Path):
    """Let every account pass through the folders above ``paths`` (``o+x``) for a
    while: a Python under root's home (pyenv) is out of reach of students' servers."""
    changed = {}
    for path in paths:
        for folder in Path(path).resolve().parents:
            mode = folder.stat().st_mode
            if not mode & 0o001 and folder not in changed:
                changed[folder] = mode
                folder.chmod(mode | 0o001)
    try:
        yield
    finally:
        for folder, mode in changed.items():
            folder.chmod(mode)
