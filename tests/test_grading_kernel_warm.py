"""course.grading.kernel.warm and .zygote: a forked kernel behaves like a fresh one, takes
interrupts and exits with its proxy; a task's forked nbgrader reports back."""

import json
import os
import re
import time

import nbformat
import pytest
from jupyter_client import KernelManager
from nbclient import NotebookClient

from course.grading.environment import threads
from course.grading.kernel import launch, warm
from course.grading.kernel.inside import Policy

PROBE = """
import json, os, resource, torch
print(json.dumps({
    "ppid": os.getppid(),
    "cwd": os.getcwd(),
    "mark": os.environ.get("WARM_TEST_MARK"),
    "as_limit": resource.getrlimit(resource.RLIMIT_AS)[0],
    "rand": torch.rand(3).tolist(),
}))
"""


@pytest.fixture(scope="module")
def zygote(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("warm")
    proc, env = warm.start(tmp, {**os.environ, **threads()})
    assert warm.wait_ready(proc, env), (tmp / "zygote.log").read_text()
    yield proc, env
    warm.stop(proc)


@pytest.fixture
def warm_env(zygote, monkeypatch):
    for key in (warm.SOCKET_ENV, "JUPYTER_PATH"):
        monkeypatch.setenv(key, zygote[1][key])
    monkeypatch.setenv("WARM_TEST_MARK", "from the grader")
    monkeypatch.setenv(launch.ENV, launch.Launch(Policy(memory=3 * 2**30)).to_env())
    return zygote[0]


def _run(cells, cwd, **kw):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(
        nb,
        kernel_name=warm.KERNEL,
        resources={"metadata": {"path": str(cwd)}},
        allow_errors=True,
        **kw,
    ).execute()
    return ["".join(o.get("text", "") for o in c.outputs) for c in nb.cells]


def test_forked_kernel_is_like_a_fresh_one(warm_env, tmp_path):
    first, second = (json.loads(_run([PROBE], tmp_path, timeout=60)[0]) for _ in "ab")
    assert first["ppid"] == warm_env.pid  # forked from the zygote, not started cold
    assert first["cwd"] == str(tmp_path)
    assert first["mark"] == "from the grader"
    assert first["as_limit"] == 3 * 2**30
    # Two new processes draw different unseeded numbers; so do two forked kernels.
    assert first["rand"] != second["rand"]


def test_interrupt_reaches_the_forked_kernel(warm_env, tmp_path):
    start = time.monotonic()
    outs = _run(
        ["import time\ntime.sleep(120)", "print('after')"],
        tmp_path,
        timeout=3,
        interrupt_on_timeout=True,
    )
    assert outs[1] == "after\n" and time.monotonic() - start < 60


def test_kernel_exits_when_its_proxy_is_killed(warm_env, tmp_path):
    km = KernelManager(kernel_name=warm.KERNEL)
    km.start_kernel(cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    pids = []
    kc.execute_interactive(
        "import os; print(os.getpid())",
        output_hook=lambda m: pids.append(m["content"].get("text", "")),
        timeout=30,
    )
    child = int("".join(pids))
    kc.stop_channels()
    km.shutdown_kernel(now=True)  # SIGKILL to the proxy: nothing to forward
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and os.path.exists(f"/proc/{child}"):
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{child}")


def test_nbgrader_forked_for_a_task_reports_output_and_exit_code(zygote, tmp_path):
    """The worker asks the zygote for a task's nbgrader itself: what nbgrader
    printed and its exit code come back (a failed autograde is not a 0)."""
    env = {**zygote[1], "PYTHONWARNINGS": "ignore"}
    log, code, pid, finished = warm.nbgrader(
        ["--version"], cwd=str(tmp_path), env=env, timeout=120
    )
    assert finished and code == 0 and pid > 0
    assert re.search(r"\d+\.\d+\.\d+", log)
    log, code, _, finished = warm.nbgrader(
        ["autograde", "no_such_assignment", "--student=s1"],
        cwd=str(tmp_path),
        env=env,
        timeout=120,
    )
    assert finished and code == 1, log
    assert warm.nbgrader(["--version"], cwd=".", env={}, timeout=5) is None  # cold


def test_reading_a_task_stops_at_its_deadline():
    """Output is read until it closes, or until the deadline if it stays open."""
    read, write = os.pipe()
    os.write(write, b"so far")
    with open(read, "rb", buffering=0) as out:
        assert warm._read_all(out, time.monotonic() + 0.3) == (b"so far", False)
        os.close(write)
        assert warm._read_all(out, time.monotonic() + 5) == (b"", True)


def test_a_flooded_log_keeps_its_start_and_end_only():
    """A task's output is read whole, but only its first and last
    ``warm.LOG_KEPT`` bytes are kept, however much a process writes."""
    import threading

    read, write = os.pipe()
    chunk = b"x" * (1 << 20)

    def flood() -> None:
        with open(write, "wb") as out:
            out.write(b"START")
            for _ in range(64):
                out.write(chunk)
            out.write(b"END")

    threading.Thread(target=flood).start()
    with open(read, "rb", buffering=0) as out:
        log, finished = warm._read_all(out, time.monotonic() + 60)
    assert finished and log.startswith(b"START") and log.endswith(b"END")
    assert len(log) <= 2 * warm.LOG_KEPT + (1 << 16) + 16
