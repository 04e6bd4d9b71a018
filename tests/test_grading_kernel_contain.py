"""Task boxes: a kernel box opened inside a task's box dies with it, and the box of
a task whose worker died is closed by the next worker's sweep."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from course.grading.kernel import contain, procs

CGROUPS = Path("/sys/fs/cgroup/pids")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.access(CGROUPS, os.W_OK), reason="needs a writable pids cgroup (root)"
    ),
    # The engine's tests kill workers; their boxes must not be swept up here.
    pytest.mark.xdist_group("grading_engine"),
]
SLEEP = [sys.executable, "-c", "import time; time.sleep(600)"]


def _sleeper(box: dict) -> subprocess.Popen:
    return subprocess.Popen(SLEEP, preexec_fn=lambda: contain.enter_box(box))


def test_kernel_boxes_live_inside_the_task_box(monkeypatch):
    task = contain.open_task_box()
    monkeypatch.setenv(contain.TASK_CGROUP_ENV, task[contain.TASK_CGROUP_ENV])
    kernel = contain.open_box(8)
    assert Path(kernel[contain.CGROUP_ENV]).parent == Path(task[contain.CGROUP_ENV])
    proc = _sleeper(kernel)
    time.sleep(0.2)
    assert contain.close_box(task) == 1  # closing the task's box kills the kernel's
    assert proc.wait(timeout=5) == -9
    assert not Path(task[contain.CGROUP_ENV]).exists()


def test_a_closed_kernel_box_goes_with_its_task_box(monkeypatch):
    """Closing a kernel's box kills what runs in it and does not wait for it to be
    gone (here a zombie nobody reaps yet); its folder goes with the task's box."""
    task = contain.open_task_box()
    monkeypatch.setenv(contain.TASK_CGROUP_ENV, task[contain.TASK_CGROUP_ENV])
    kernel = contain.open_box(8)
    proc = _sleeper(kernel)
    time.sleep(0.2)
    assert contain.close_box(kernel) == 1
    assert proc.wait(timeout=5) == -9
    assert contain.close_box(task) == 0
    assert not Path(kernel[contain.CGROUP_ENV]).exists()
    assert not Path(task[contain.CGROUP_ENV]).exists()


def test_sweep_closes_boxes_of_dead_workers_only(monkeypatch):
    # A folder of its own: the Dask workers of tests running at the same time sweep
    # the machine's root, and would close this test's orphan before it does.
    root = CGROUPS / f"course-test-{os.getpid()}"
    root.mkdir()
    monkeypatch.setattr(contain, "_ROOT", root)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that no longer runs: a worker that was killed
    orphan = root / f"course-task-{dead.pid}-0123456789ab"
    orphan.mkdir()
    # This process's pid with another start time: a dead worker whose pid was reused.
    reused = root / f"course-task-{os.getpid()}.{procs.started(os.getpid()) - 1}-r-0a"
    reused.mkdir()
    mine = contain.open_task_box()  # this process's: alive, so left alone
    lost, kept = _sleeper({contain.CGROUP_ENV: str(orphan)}), _sleeper(mine)
    lost_too = _sleeper({contain.CGROUP_ENV: str(reused)})
    time.sleep(0.2)
    try:
        assert contain.sweep_orphans() == 2
        assert lost.wait(timeout=5) == -9 and not orphan.exists()
        assert lost_too.wait(timeout=5) == -9 and not reused.exists()
        assert kept.poll() is None and Path(mine[contain.CGROUP_ENV]).exists()
    finally:
        contain.close_box(mine)
        kept.wait()
        contain.close_box({contain.CGROUP_ENV: str(root)})


def test_a_run_closes_its_own_boxes_only(monkeypatch):
    """When a grading run ends, its task boxes close even where their worker
    lives on (a task the scheduler ran twice); another run's boxes stay."""
    root = CGROUPS / f"course-test-run-{os.getpid()}"
    root.mkdir()
    monkeypatch.setattr(contain, "_ROOT", root)
    ours, theirs = contain.open_task_box("ours"), contain.open_task_box("theirs")
    a, b = _sleeper(ours), _sleeper(theirs)
    time.sleep(0.2)
    try:
        assert contain.close_run("ours") == 1
        assert a.wait(timeout=5) == -9 and not Path(ours[contain.CGROUP_ENV]).exists()
        assert b.poll() is None and Path(theirs[contain.CGROUP_ENV]).exists()
    finally:
        contain.close_box(theirs)
        b.wait()
        contain.close_box({contain.CGROUP_ENV: str(root)})
