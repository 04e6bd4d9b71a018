"""Where a class is graded: a dask cluster whose workers each keep a warm zygote.

* **Where.** By default an embedded ``LocalCluster`` on 127.0.0.1: one worker
  process per core, one thread each. ``scheduler`` (``tcp://HOST:PORT``) or
  ``scheduler_file`` grades on a cluster that already runs (SLURM through
  dask-jobqueue, Kubernetes through dask-kubernetes; ``docs/grading-at-scale.md``).
* **Warm kernels.** :class:`WarmKernels`, a worker plugin, starts a zygote
  (:mod:`course.grading.warm`) when a worker starts and stops it with the worker.
* **Worker deaths.** The scheduler re-runs the task of a worker that died, on
  another one; nbgrader updates the submission's gradebook rows, so they are never
  doubled. A task that takes two workers down with it fails with that reason
  (``allowed_failures`` is 1), and no queued task is blamed with it (each worker
  holds only the task it runs: ``worker-saturation`` 1.0).
* **Boxes.** The next worker on a machine closes the task boxes a killed one left
  (:func:`course.grading.contain.sweep_orphans`), and when a run ends every box of
  the run is closed (:func:`end_run`).

The tasks themselves are :mod:`course.grading.engine`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from distributed import WorkerPlugin

from . import contain
from . import warm as warm_kernels
from .environment import tool_env

PLUGIN = "course-warm-kernels"
ALLOWED_FAILURES = 1  # a task may lose one worker; the second death fails it


class WarmKernels(WorkerPlugin):
    """Start a zygote when a worker starts; stop it with the worker.

    Tasks find the environment that makes their kernels warm in ``env``; if the
    zygote does not start, they run ordinary kernels.
    """

    name = PLUGIN

    def __init__(self, warm: bool = True):
        self.warm = warm
        self.env: dict = {}
        self._zygote = None
        self._tmp = None

    async def setup(self, worker) -> None:
        contain.sweep_orphans()  # what a worker killed before this one left behind
        self.env = tool_env()
        if not self.warm:
            return
        self._tmp = tempfile.mkdtemp(prefix="course-warm-")
        self._zygote, env = warm_kernels.start(Path(self._tmp), self.env)
        if await asyncio.to_thread(warm_kernels.wait_ready, self._zygote, env):
            self.env = env

    def teardown(self, worker) -> None:
        if self._zygote is not None:
            warm_kernels.stop(self._zygote)
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)


def sandbox_problems(client) -> dict[str, str]:
    """Why each worker that cannot sandbox a kernel cannot (empty: all can)."""
    from . import sandbox

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


@contextlib.contextmanager
def cluster(
    *,
    scheduler: str | None = None,
    scheduler_file: str | None = None,
    workers: int | None = None,
    warm: bool = True,
):
    """A dask Client: the cluster named, or an embedded one on this machine.

    Yields the client once every worker has its zygote (or has given up on one).
    """
    import dask
    from distributed import Client, LocalCluster

    settings = {
        "distributed.scheduler.allowed-failures": ALLOWED_FAILURES,
        "distributed.scheduler.worker-saturation": 1.0,
    }
    with dask.config.set(settings), contextlib.ExitStack() as stack:
        if scheduler or scheduler_file:
            client = stack.enter_context(
                Client(scheduler, scheduler_file=scheduler_file)
            )
        else:
            local = LocalCluster(
                n_workers=workers or os.cpu_count() or 1,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
                memory_limit=0,  # kernels have their own cap
                silence_logs=40,
            )
            stack.enter_context(local)
            client = stack.enter_context(Client(local))
        client.run_on_scheduler(_tune)
        client.register_plugin(WarmKernels(warm=warm), name=PLUGIN)
        workers_at_start = len(client.nthreads())
        yield client
        _sweep_when_replaced(client, workers=workers_at_start)


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
