"""Where a class is graded: a dask cluster whose workers each keep a warm zygote.

* **Where.** By default an embedded ``LocalCluster`` on 127.0.0.1: one worker
  process per core, one thread each. ``scheduler`` (``tls://HOST:PORT``) or
  ``scheduler_file`` grades on a cluster that already runs (SLURM through
  dask-jobqueue, Kubernetes through dask-kubernetes; ``docs/grading-at-scale.md``).
* **Who may use it.** dask runs whatever code a client sends, and plain TCP has no
  authentication: anyone who reaches a port could run code as the grader. The
  embedded cluster speaks mutual TLS with a key made for the run, which only this
  process and its workers hold; a named scheduler must be reached over TLS with
  the instructor's files (or dask's ``distributed.comm.tls`` settings), and one on
  plain TCP is refused (:func:`refusal`) unless ``insecure_scheduler`` says so.
* **Warm kernels.** :class:`WarmKernels`, a worker plugin, starts a zygote
  (:mod:`course.grading.kernel.warm`) when a worker starts and stops it with the worker.
* **Worker deaths.** The scheduler re-runs the task of a worker that died, on
  another one; nbgrader updates the submission's gradebook rows, so they are never
  doubled. A task that takes two workers down with it fails with that reason
  (``allowed_failures`` is 1), and no queued task is blamed with it (each worker
  holds only the task it runs: ``worker-saturation`` 1.0).
* **Boxes.** The next worker on a machine closes the task boxes a killed one left
  (:func:`course.grading.kernel.contain.sweep_orphans`), and when a run ends every box of
  the run is closed (:func:`end_run`).

The tasks themselves are :mod:`course.grading.run.engine`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from distributed import WorkerPlugin

from ..environment import tool_env
from ..kernel import contain
from ..kernel import warm as warm_kernels

PLUGIN = "course-warm-kernels"
ALLOWED_FAILURES = 1  # a task may lose one worker; the second death fails it
ENCRYPTED = ("tls", "wss")  # the comms whose peers prove they hold a certificate
# dask's HTTP servers answer anyone (plain HTTP) with who is graded and the workers'
# logs, even with the dashboard off: the embedded cluster's serve no pages at all.
NO_PAGES = {
    "distributed.scheduler.http.routes": [],
    "distributed.worker.http.routes": [],
}


class WarmKernels(WorkerPlugin):
    """Start a zygote when a worker starts; stop it with the worker.

    Tasks find the environment that makes their kernels warm in ``env``; if the
    zygote does not start, they run ordinary kernels. ``preload``: the autograde
    preprocessors (``module.Class``) whose modules the zygote imports.
    """

    name = PLUGIN

    def __init__(self, warm: bool = True, preload: tuple[str, ...] = ()):
        self.warm = warm
        self.preload = tuple(preload)
        self.env: dict = {}
        self._zygote = None
        self._tmp = None

    async def setup(self, worker) -> None:
        contain.sweep_orphans()  # what a worker killed before this one left behind
        self.env = tool_env()
        if not self.warm:
            return
        self._tmp = tempfile.mkdtemp(prefix="course-warm-")
        self._zygote, env = warm_kernels.start(
            Path(self._tmp), self.env, preload=self.preload
        )
        if await asyncio.to_thread(warm_kernels.wait_ready, self._zygote, env):
            self.env = env

    def teardown(self, worker) -> None:
        if self._zygote is not None:
            warm_kernels.stop(self._zygote)
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)


def sandbox_problems(client) -> dict[str, str]:
    """Why each worker that cannot sandbox a kernel cannot (empty: all can)."""
    from ..kernel import sandbox

    answers = client.run(sandbox.probe)
    return {worker: reason for worker, reason in answers.items() if reason}


def end_run(client, run: str) -> None:
    """Close the task boxes of grading run ``run`` on every worker and here: a task
    the scheduler started twice (its first worker lost, then back) ends with the
    run, as does anything a task's box still holds."""
    client.run(contain.close_run, run, on_error="ignore")
    contain.close_run(run)


def _tune(dask_scheduler=None) -> None:
    """On the scheduler: fail a task at its second worker death; a worker holds
    only the task it runs, so no queued bystander is blamed for a death."""
    dask_scheduler.allowed_failures = ALLOWED_FAILURES
    dask_scheduler.WORKER_SATURATION = 1.0


class Refused(ValueError):
    """A scheduler ``course grade`` does not grade on; the message says why."""


def scheduler_address(
    *, scheduler: str | None = None, scheduler_file: str | None = None
) -> str | None:
    """The address of the scheduler named, read from its file if need be (waiting
    for the file as long as dask waits for a connection); None for none named."""
    import dask
    from dask.utils import parse_timedelta

    if scheduler or not scheduler_file:
        return scheduler
    path = Path(scheduler_file)
    wait = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"))
    deadline = time.monotonic() + wait
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    return json.loads(path.read_text())["address"]


def security(
    *,
    tls_ca_file: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    insecure_scheduler: bool = False,
):
    """The ``distributed.Security`` of this client of a named scheduler: the files
    given, else dask's own ``distributed.comm.tls`` settings; encryption required
    unless ``insecure_scheduler``."""
    from distributed import Security

    given = {
        "tls_ca_file": tls_ca_file,
        "tls_client_cert": tls_cert,
        "tls_client_key": tls_key,
    }
    chosen = {name: value for name, value in given.items() if value}
    return Security(require_encryption=not insecure_scheduler, **chosen)


def refusal(
    *,
    scheduler: str | None = None,
    scheduler_file: str | None = None,
    tls_ca_file: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    insecure_scheduler: bool = False,
) -> str | None:
    """Why ``course grade`` does not grade on the scheduler named (None: it does).

    Parameters
    ----------
    scheduler, scheduler_file : str, optional
        The scheduler's address, or the file ``dask scheduler`` wrote it in;
        neither: the embedded cluster, which is never refused.
    tls_ca_file, tls_cert, tls_key : str, optional
        The instructor's TLS files (default: dask's ``distributed.comm.tls``).
    insecure_scheduler : bool
        Grade on a scheduler reached over plain TCP all the same.

    Returns
    -------
    str or None
        One sentence, or None.
    """
    import dask

    try:
        address = scheduler_address(scheduler=scheduler, scheduler_file=scheduler_file)
    except (OSError, ValueError, KeyError, TypeError):
        return f"Not grading: {scheduler_file} holds no scheduler's address."
    if address is None:
        return None
    default = dask.config.get("distributed.comm.default-scheme")
    scheme = address.split("://")[0] if "://" in address else default
    if scheme not in ENCRYPTED:
        if insecure_scheduler:
            return None
        return (
            f"Not grading on {address}: over plain {scheme}:// anyone who reaches "
            "the scheduler can run code on it and on its workers, as the accounts "
            "they run as; start it with TLS (docs/grading-at-scale.md) or pass "
            "--insecure-scheduler."
        )
    chosen = security(tls_ca_file=tls_ca_file, tls_cert=tls_cert, tls_key=tls_key)
    if not (chosen.tls_ca_file and chosen.tls_client_cert):
        return (
            f"Not grading on {address}: a {scheme}:// scheduler needs this grader's "
            "TLS files (--tls-ca-file, --tls-cert and --tls-key, or dask's "
            "distributed.comm.tls settings)."
        )
    return None


@contextlib.contextmanager
def cluster(
    *,
    scheduler: str | None = None,
    scheduler_file: str | None = None,
    workers: int | None = None,
    warm: bool = True,
    preload: tuple[str, ...] = (),
    tls_ca_file: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    insecure_scheduler: bool = False,
):
    """A dask Client: the cluster named, or an embedded one on this machine.

    Yields the client once every worker has its zygote (or has given up on one),
    which has imported the modules of ``preload``'s classes (the autograde
    preprocessors, :attr:`course.grading.settings.Settings.preprocessors`).
    The embedded cluster speaks mutual TLS with a key made for it; a scheduler
    named is reached with the TLS files given (:func:`security`), and raises
    :class:`Refused` where :func:`refusal` says why not.
    """
    import dask
    from distributed import Client

    settings = {
        "distributed.scheduler.allowed-failures": ALLOWED_FAILURES,
        "distributed.scheduler.worker-saturation": 1.0,
    }
    with dask.config.set(settings), contextlib.ExitStack() as stack:
        if scheduler or scheduler_file:
            tls = {"tls_ca_file": tls_ca_file, "tls_cert": tls_cert, "tls_key": tls_key}
            named = {"scheduler": scheduler, "scheduler_file": scheduler_file}
            if why := refusal(**named, **tls, insecure_scheduler=insecure_scheduler):
                raise Refused(why)
            chosen = security(**tls, insecure_scheduler=insecure_scheduler)
            address = scheduler_address(**named)
            client = stack.enter_context(Client(address, security=chosen))
        else:
            local = stack.enter_context(_local_cluster(workers))
            client = stack.enter_context(Client(local))  # with the cluster's key
        client.run_on_scheduler(_tune)
        client.register_plugin(WarmKernels(warm=warm, preload=preload), name=PLUGIN)
        workers_at_start = len(client.nthreads())
        yield client
        _sweep_when_replaced(client, workers=workers_at_start)


def _local_cluster(workers: int | None):
    """The embedded cluster: on 127.0.0.1, over mutual TLS with a certificate and
    key made for it (in memory, handed to its worker processes by their nannies),
    so no other account of the machine can use it; no dashboard, nor any page."""
    import dask
    from distributed import LocalCluster, Security

    with dask.config.set(NO_PAGES):  # nannies keep it for the workers they restart
        return LocalCluster(
            n_workers=workers or os.cpu_count() or 1,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            protocol="tls://",
            security=Security.temporary(),  # require_encryption=True
            dashboard_address=None,
            memory_limit=0,  # kernels have their own cap
            silence_logs=40,
        )


def _sweep_when_replaced(client, *, workers: int, seconds: float = 60) -> None:
    """Close the task boxes that workers killed near the end left behind.

    A killed worker's nanny starts a new one on its machine; wait (a while) until
    they are all back, then have every worker sweep its machine, and sweep this
    one too: workers that share it (an embedded cluster) may not be back yet.
    """
    with contextlib.suppress(TimeoutError):
        client.wait_for_workers(workers, timeout=seconds)
    client.run(contain.sweep_orphans)
    contain.sweep_orphans()
