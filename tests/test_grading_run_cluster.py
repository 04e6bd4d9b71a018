"""The cluster a class is graded on: what each worker's warm-kernel plugin gives
the kernels its tasks start, and who else may use it (nobody: mutual TLS)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import services

from course import cli
from course.grading.run import cluster

# A worker, as it starts, sweeps the task boxes dead workers left: the engine's
# tests kill workers and check what their boxes left, so this runs beside them.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("grading_engine")]

MALLOC = "MALLOC_TRIM_THRESHOLD_"  # what dask's nanny sets for its workers


def _malloc_settings(dask_worker=None) -> dict:
    """On a worker: the dask setting in its own environment, in the environment its
    tasks get, and in its zygote's (whose malloc every warm kernel inherits)."""
    plugin = dask_worker.plugins[cluster.PLUGIN]
    zygote = Path(f"/proc/{plugin._zygote.pid}/environ").read_bytes().split(b"\0")
    return {
        "worker": os.environ.get(MALLOC),
        "tasks": plugin.env.get(MALLOC),
        "zygote": [e for e in zygote if e.startswith(MALLOC.encode())],
    }


def test_kernels_keep_glibc_malloc_tuning():
    """dask's nanny sets MALLOC_TRIM_THRESHOLD_ for its workers; a kernel that
    inherited it mapped every tensor over 128 KiB afresh (09 graded in twice the
    time). Neither the zygote nor nbgrader nor a kernel gets it."""
    with cluster.cluster(workers=1) as client:
        (settings,) = client.run(_malloc_settings).values()
    assert settings["worker"] is not None  # what dask sets, so the test can fail
    assert settings["tasks"] is None and settings["zygote"] == [], settings


# Run as another account of the machine: for each address, connect to it and run a
# function there that writes a marker file and returns its uid (of an HTTP server's
# page: fetch it, and give its status), then print, as JSON, what each gave or why
# it gave nothing. An address that starts with tls:// is tried with a certificate
# of the attacker's own, trusting any server's.
ATTACK = """
import asyncio, json, os, ssl, sys, urllib.request
import dask
from distributed import Client, Security
from distributed.core import rpc
from distributed.protocol.pickle import dumps

class OwnCertificate(Security):
    def get_connection_args(self, role):
        args = super().get_connection_args(role)
        args["ssl_context"].check_hostname = False
        args["ssl_context"].verify_mode = ssl.CERT_NONE
        return args

def mark(path):
    open(path, "w").write(str(os.getuid()))
    return os.getuid()

async def on_worker(address, security, marker):
    args = security.get_connection_args("client")
    async with rpc(address, connection_args=args) as server:
        answer = await server.run(function=dumps(mark), args=dumps((marker,)))
    return answer["result"]

def attack(role, address, marker):
    if role == "http":
        with urllib.request.urlopen(address, timeout=3) as page:
            return page.status
    security = OwnCertificate.temporary() if address.startswith("tls") else None
    if role == "scheduler":
        with Client(address, security=security, timeout=3) as client:
            return client.run_on_scheduler(mark, marker)
    return asyncio.run(on_worker(address, security or Security(), marker))

said = {}
with dask.config.set({"distributed.comm.timeouts.connect": "3s"}):
    for role, address, marker in json.loads(sys.argv[1]):
        try:
            said[address] = attack(role, address, marker)
        except Exception as err:
            said[address] = f"refused: {type(err).__name__}"
print(json.dumps(said))
"""


def _addresses(client) -> list[tuple[str, str]]:
    """The scheduler's, every worker's and every nanny's address (role, address)."""
    info = client.scheduler_info()
    found = [("scheduler", info["address"])]
    for address, worker in info["workers"].items():
        found += [("worker", address), ("nanny", worker["nanny"])]
    return found


def _pages(client) -> list[tuple[str, str]]:
    """A page of the scheduler's HTTP server that names the workers, and one of
    each worker's (role "http", URL)."""
    info = client.scheduler_info()
    port = info["services"]["dashboard"]
    found = [("http", f"http://127.0.0.1:{port}/json/identity.json")]
    for worker in info["workers"].values():
        found += [
            ("http", f"http://127.0.0.1:{worker['services']['dashboard']}/health")
        ]
    return found


def _as_nobody(targets: list[tuple[str, str]], folder: Path) -> dict:
    """What the account ``nobody`` got from each address (``ATTACK``), by address;
    each target's marker is ``folder/marker-N``."""
    jobs = [(role, address, str(folder / f"marker-{n}"))
            for n, (role, address) in enumerate(targets)]  # fmt: skip
    python = Path(sys.executable)
    with services.reachable_by_all(python.resolve(), Path(sys.base_prefix) / "lib"):
        proc = subprocess.run(
            ["runuser", "-u", "nobody", "--", python, "-c", ATTACK, json.dumps(jobs)],
            capture_output=True, text=True, timeout=120, cwd="/",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def _plain(addresses: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The same ports, addressed as plain tcp://."""
    return [(role, "tcp://" + a.split("://")[1]) for role, a in addresses]


def _made_before():
    """The embedded cluster as ``cluster()`` made it before: plain TCP on 127.0.0.1,
    no ``distributed.Security`` (one worker)."""
    from distributed import LocalCluster

    return LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        silence_logs=40,
    )


def test_other_accounts_cannot_use_the_embedded_cluster(tmp_path):
    """Another account of the machine (nobody) reaches no part of the embedded
    cluster: neither with a certificate of its own over TLS nor over plain TCP,
    neither the scheduler nor a worker nor a nanny, so it runs no code as the
    grader (root); its HTTP servers show it no page. Control: the same account, on
    a cluster made as before (plain TCP, no Security), runs code on its scheduler,
    worker and nanny as uid 0, and reads their pages."""
    from distributed import Client

    with (
        cluster.cluster(workers=1, warm=False) as client,
        _made_before() as before,
        Client(before) as plain_client,
    ):
        secured = _addresses(client)
        closed = secured + _plain(secured) + _pages(client)
        old = _addresses(plain_client)
        opened = old + _pages(plain_client)
        said = _as_nobody(closed + opened, tmp_path)
    assert all(a.startswith("tls://") for _, a in secured), secured
    for _, address in closed:
        assert str(said[address]).startswith("refused"), (address, said)
    assert [said[a] for _, a in opened] == [0] * 3 + [200] * 2, said  # it works
    code_ran = {f"marker-{(closed + opened).index(target)}" for target in old}
    assert {p.name for p in tmp_path.glob("marker-*")} == code_ran


@pytest.mark.parametrize("by", ["address", "file"])
def test_grade_refuses_a_plain_tcp_scheduler(tmp_path, capsys, by):
    """``course grade`` does not grade on a scheduler over plain TCP, given or found
    in its scheduler file: one sentence, exit status 2, the gradebook untouched.
    It would on a TLS one with the grader's files, or when told it may."""
    file = tmp_path / "scheduler.json"
    file.write_text(json.dumps({"address": "tcp://127.0.0.1:1"}))
    where = {"address": "--scheduler=tcp://127.0.0.1:1",
             "file": f"--scheduler-file={file}"}[by]  # fmt: skip
    code = cli.main(["grade", f"--root={tmp_path}", where])
    out = capsys.readouterr().out
    assert code == 2, out
    assert out.startswith("Not grading on tcp://127.0.0.1:1: over plain tcp://"), out
    assert "--insecure-scheduler" in out and len(out.strip().splitlines()) == 1
    assert not (tmp_path / "gradebook.db").exists()
    tls = services.tls_files(tmp_path)
    files = {"tls_ca_file": str(tls.ca), "tls_cert": str(tls.cert),
             "tls_key": str(tls.key)}  # fmt: skip
    assert cluster.refusal(scheduler="tls://127.0.0.1:1", **files) is None
    assert cluster.refusal(scheduler="tls://127.0.0.1:1") is not None  # no files
    assert cluster.refusal(scheduler_file=str(file), insecure_scheduler=True) is None
