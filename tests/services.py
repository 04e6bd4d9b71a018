"""Real services for the tests and the bench, started and stopped by them.

* :func:`postgres`: Debian's PostgreSQL server (``make setup`` installs it), run by
  ``initdb`` and ``pg_ctl`` as the ``postgres`` user (they refuse root), on a Unix
  socket in a folder only that user (and root) may enter, no TCP port, fsync off;
  yields a SQLAlchemy URL of a fresh database.
* :func:`dask_cluster`: a ``dask scheduler`` and a ``dask worker`` with its own
  worker processes, started with their command-line programs on 127.0.0.1 over
  mutual TLS (:func:`tls_files`); yields the scheduler file and the TLS files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
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
    empty database.

    It listens on a Unix socket only, in a folder of the ``postgres`` user's (0700):
    its logins are ``trust``, so no other account of the machine (a student on the
    course hub) may reach it, as none may reach a loopback port's.
    """
    import psycopg

    bindir, port = _pg_bin(), free_port()
    home = Path(tempfile.mkdtemp(prefix="course-pg-"))  # /tmp, 0700: postgres' own
    if os.geteuid() == 0:
        shutil.chown(home, "postgres")
    data = home / "data"
    _as_postgres([bindir / "initdb", "-D", data, "-A", "trust", "-U", "postgres"])
    options = (
        f"-p {port} -k {home} -c listen_addresses='' -c fsync=off "
        "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
    )
    start = [bindir / "pg_ctl", "-D", data, "-o", options, "-l", home / "log", "-w"]
    _as_postgres([*start, "start"])
    try:
        where = f"host={home}&port={port}"
        with psycopg.connect(f"postgresql://postgres@/postgres?{where}",
                             autocommit=True) as conn:  # fmt: skip
            conn.execute(f"CREATE DATABASE {database}")
        yield f"postgresql+psycopg://postgres@/{database}?{where}"
    finally:
        _as_postgres([bindir / "pg_ctl", "-D", data, "-m", "immediate", "stop"])
        shutil.rmtree(home, ignore_errors=True)


@dataclasses.dataclass(frozen=True)
class TLSFiles:
    """A CA certificate, and a certificate it signed with its key, in PEM files."""

    ca: Path
    cert: Path
    key: Path

    def flags(self) -> list[str]:
        """The options of ``dask scheduler``, ``dask worker`` and ``course grade``
        that name these files."""
        return [f"--tls-ca-file={self.ca}", f"--tls-cert={self.cert}",
                f"--tls-key={self.key}"]  # fmt: skip

    def security(self):
        """A ``distributed.Security`` for a client holding these files."""
        from distributed import Security

        return Security(tls_ca_file=str(self.ca), tls_client_cert=str(self.cert),
                        tls_client_key=str(self.key), require_encryption=True)  # fmt: skip


def tls_files(folder: Path) -> TLSFiles:
    """Make a CA and a certificate it signs (for every role of a dask cluster) in a
    new folder under ``folder`` that only its owner may enter."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    home = Path(tempfile.mkdtemp(prefix="tls-", dir=folder))  # 0700
    ca_key = ec.generate_private_key(ec.SECP256R1())
    key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("course-test-ca", ca_key.public_key(), ca_key, ca=True)
    cert = _certificate("course-test-dask", key.public_key(), ca_key, ca=False)
    files = TLSFiles(ca=home / "ca.pem", cert=home / "cert.pem", key=home / "key.pem")
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.touch(mode=0o600)
    files.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return files


def _certificate(name: str, public, ca_key, *, ca: bool):
    """A certificate for ``public``, valid for two days, signed by ``ca_key`` (the
    CA's own when ``ca``), with the extensions Python's strict checks ask for."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID

    def named(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    now = datetime.datetime.now(datetime.UTC)
    usage = x509.KeyUsage(
        digital_signature=not ca,
        content_commitment=False,
        key_encipherment=not ca,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )
    return (
        x509.CertificateBuilder()
        .subject_name(named(name))
        .issuer_name(named("course-test-ca"))
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            False,
        )
        .sign(ca_key, hashes.SHA256())
    )


@contextlib.contextmanager
def dask_cluster(folder: Path, workers: int = 2):
    """``dask scheduler`` and ``dask worker --nworkers N --nthreads 1`` on
    127.0.0.1, over mutual TLS with files made for them (:func:`tls_files`);
    yields the scheduler file and those files once all N workers are up."""
    from distributed import Client

    file = folder / "scheduler.json"
    tls = tls_files(folder)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    common = ["--no-dashboard", "--protocol", "tls", *tls.flags()]
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
        security = tls.security()
        with Client(scheduler_file=str(file), security=security, timeout=30) as client:
            client.wait_for_workers(workers, timeout=120)
        yield file, tls
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
            argv = ["useradd", "--create-home", "--home-dir", str(home),
                    "--shell", "/bin/bash", name]  # fmt: skip
            _accounts_tool(argv)
            made[name] = home
            _accounts_tool(["chpasswd"], stdin=f"{name}:{password}")
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
        _accounts_tool(["userdel", "--remove", name], check=False)


def _accounts_tool(argv: list[str], *, stdin: str = "", check: bool = True) -> None:
    """Run ``useradd``, ``chpasswd`` or ``userdel``; again while another test's
    run of one of them holds /etc/passwd's lock (tests of two xdist workers make
    and remove accounts at the same time)."""
    for _ in range(100):
        proc = subprocess.run(argv, input=stdin, text=True, capture_output=True)
        if "lock" not in proc.stderr.lower():
            break
        time.sleep(0.1)
    if check and proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, argv, stderr=proc.stderr)


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


RUNUSER = shutil.which("runuser") or "/usr/sbin/runuser"


def run_as(user: str, *cmd: str, env: dict[str, str], cwd: Path, check: bool = True,
           timeout: float = 600) -> subprocess.CompletedProcess:  # fmt: skip
    """Run ``cmd`` as the Unix account ``user`` in ``cwd``, with only ``env``
    (what a student or the instructor runs on the machine)."""
    proc = subprocess.run(
        [RUNUSER, "-u", user, "--", "env", "-i"]
        + [f"{k}={v}" for k, v in env.items()]
        + list(cmd),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} as {user}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def inbound_entry(user: str, inbound: Path, *, named: str, assignment: str,
                  when, notebook: Path, extra: str = "") -> Path:  # fmt: skip
    """An entry of nbgrader's inbound folder as ``nbgrader submit`` lays it out,
    written by ``user`` (as any account can) in the name of ``named``, claiming the
    time ``when`` (in its name and ``timestamp.txt``), holding a copy of
    ``notebook`` (a file ``user`` can read); ``extra``: more shell lines run in it
    as ``user``."""
    claimed = when.strftime("%Y-%m-%d %H:%M:%S.%f %Z")
    entry = inbound / f"{named}+{assignment}+{claimed}+{user[-3:]}"
    script = f"""umask 022; mkdir '{entry}'; cd '{entry}'
        cp '{notebook}' '{assignment}.ipynb'
        printf '%s' '{claimed}' > timestamp.txt
        printf 'secret-{user}' > submission_secret.txt
        {extra}"""
    subprocess.run([RUNUSER, "-u", user, "--", "sh", "-euc", script], check=True)
    return entry


@contextlib.contextmanager
def course_lab(folder: Path, *, lang: str, assignment: str, notebook: dict):
    """``course lab`` as a student starts it, in edition ``lang``, on a copy of the
    course in ``folder`` whose work folder holds ``notebook`` as ``assignment``;
    yield ``(url, the notebook's path)``. The hub's student view applies."""
    import json

    from course import grading, i18n, work

    root = folder / "course"
    edition = i18n.edition_root(root, lang)
    for stage in ("source", "release"):
        src = i18n.edition_root(grading.ROOT, lang) / stage / assignment
        shutil.copytree(src, edition / stage / assignment)
    shutil.copytree(grading.ROOT / "hub" / "student", root / "hub" / "student")
    mine = root / work.folder_name(lang) / assignment
    mine.mkdir(parents=True)
    (mine / f"{assignment}.ipynb").write_text(json.dumps(notebook))
    port = free_port()
    cmd = [sys.executable, "-m", "course", "lab", f"--root={root}", "--"]
    cmd += ["--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}"]
    cmd += ["--ServerApp.port_retries=0", "--IdentityProvider.token="]
    cmd += [f"--LabApp.user_settings_dir={folder / 'settings'}"]
    cmd += [f"--LabApp.workspaces_dir={folder / 'workspaces'}"]
    env = {**os.environ, "COURSE_LANG": lang, "XDG_STATE_HOME": str(folder / "state")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env.pop("COURSE_HINTS", None)  # the default: each request unlocks the next
    url = f"http://127.0.0.1:{port}"
    with serving(cmd, probe=f"{url}/api/status", log=folder / "lab.log", env=env):
        yield url, mine / f"{assignment}.ipynb"


def late_penalties(db: str, assignment: str) -> dict[str, float]:
    """``{student: late penalty}`` of ``assignment``'s submissions, from the
    gradebook at ``db`` (a SQLAlchemy URL)."""
    from nbgrader.api import Gradebook

    with Gradebook(db) as gb:
        return {
            s.student.id: s.late_submission_penalty
            for s in gb.assignment_submissions(assignment)
        }


def single_user_server(user: str) -> Path | None:
    """``/proc/PID`` of ``user``'s running JupyterHub single-user server."""
    import pwd

    uid = pwd.getpwnam(user).pw_uid
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if proc.stat().st_uid == uid and (
                b"jupyterhub-singleuser" in (proc / "cmdline").read_bytes()
            ):
                return proc
        except OSError:  # it ended meanwhile
            continue
    return None
