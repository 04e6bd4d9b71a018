"""Benchmark: what a sandbox costs one kernel, for each way of making one.

Each way starts a kernel and runs the cell every notebook starts with (import torch
and the course, load the model), ``--rounds`` times, alternating the ways:

* ``warm``: forked from the zygote (``course grade``'s kernels), no sandbox;
* ``warm+sandbox``: forked from the zygote, then :func:`course.grading.kernel.sandbox.enter`
  (namespaces, mounts, seccomp in the forked child: what the course does);
* ``cold``: a new ``ipykernel`` process (``--cold``), no sandbox;
* ``bubblewrap``: Debian's ``bwrap`` (namespaces, a read-only root, its own /tmp
  and /proc) running a new Python on the same cell, against ``python`` doing so
  without it: a sandbox that must ``exec`` cannot take a kernel from the zygote, so
  this is what each of its kernels would pay at least. Skipped without ``bwrap``.

    sudo apt-get install bubblewrap    # only for the comparison
    .venv/bin/python bench/sandbox_start.py --rounds 5
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jupyter_client.manager import KernelManager

from course.grading import tool_env
from course.grading.kernel import launch, warm

CELL = "import torch\nfrom course import models\n_ = models.load()\n"


def _bwrap(command: list[str]) -> list[str]:
    mounts = ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
              "--tmpfs", "/tmp"]  # fmt: skip
    return ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", *mounts,
            *command]  # fmt: skip


def run_process(way: str) -> float:
    """Seconds a new Python takes to run :data:`CELL` (in ``bwrap`` or not)."""
    command = [sys.executable, "-c", CELL]
    start = time.perf_counter()
    subprocess.run(_bwrap(command) if way == "bubblewrap" else command, check=True,
                   stdout=subprocess.DEVNULL, env=tool_env())  # fmt: skip
    return time.perf_counter() - start


def start_and_run(way: str, env: dict) -> float:
    """Seconds from asking for a kernel to the end of :data:`CELL`."""
    with tempfile.TemporaryDirectory() as tmp:
        km = KernelManager(kernel_name="python3", transport="ipc")
        km.ip = str(Path(tmp, "kernel"))
        python = [sys.executable, "-m", "course.grading.kernel.warm"]
        km.kernel_spec.argv[: len(km.kernel_spec.argv) - 2] = python
        env = dict(env)
        if way == "cold":
            env.pop(warm.SOCKET_ENV, None)
        if way == "warm+sandbox":
            env[launch.ENV] = launch.Launch(sandboxed=True).to_env()
        start = time.perf_counter()
        km.start_kernel(env=env, cwd=tmp)
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=120)
            kc.execute_interactive(CELL, timeout=120)
            return time.perf_counter() - start
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ways = ["warm", "warm+sandbox", "cold", "python"]
    if shutil.which("bwrap"):
        ways.append("bubblewrap")
    with tempfile.TemporaryDirectory() as tmp:
        zygote, env = warm.start(Path(tmp), tool_env())
        assert warm.wait_ready(zygote, env)
        seconds: dict[str, list[float]] = {way: [] for way in ways}
        try:
            for r in range(args.rounds):
                for way in ways if r % 2 == 0 else ways[::-1]:
                    run = run_process if way in ("python", "bubblewrap") else None
                    seconds[way].append(run(way) if run else start_and_run(way, env))
        finally:
            warm.stop(zygote)
    base = statistics.median(seconds["warm"])
    for way in ways:
        median = statistics.median(seconds[way])
        print(f"{way:14s} {median:6.3f} s  ({median / base:5.2f}x warm)")
    if "bubblewrap" not in ways:
        print("bubblewrap: not installed (apt-get install bubblewrap to compare)")


if __name__ == "__main__":
    main()
