"""The cluster a class is graded on: what each worker's warm-kernel plugin gives
the kernels its tasks start."""

import os
from pathlib import Path

import pytest

from course.grading import cluster

# A worker, as it starts, sweeps the task boxes dead workers left: the engine's
# tests kill workers and check what their boxes left, so this runs beside them.
pytestmark = pytest.mark.xdist_group("grading_engine")

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
