"""Benchmark: time and kernel CPU of each solution notebook, as ratios to a floor
notebook that only imports the course and loads the model; peak kernel memory.

Each notebook runs in a fresh (cold) kernel inside its own child process, so the
kernel's peak resident memory and CPU time (``RUSAGE_CHILDREN``) are measured
alone, with one thread as grading kernels have. Each run of a notebook follows a
run of the floor and is divided by it (this machine's speed drifts by a third
within minutes, which a floor timed once would pass on to every ratio); the
median of five pairs and their range are reported.

    .venv/bin/python bench/notebook_cost.py            # every source notebook
    .venv/bin/python bench/notebook_cost.py 05_softmax_and_scaling

Measured 2026-12-02 on the 2-core machine with nothing else running, median
(range) of five pairs, wall-clock / kernel CPU: 01 1.15 / 1.15, 02 1.08 / 1.13,
03 1.26 / 1.29, 04 1.22 / 1.09, 05 1.31 / 1.32, 06 1.12 / 1.15, 07 1.00 / 1.05,
08 1.12 / 1.11, 09 1.37 (1.13-1.50) / 1.38 (1.29-1.53), 10 1.32 (1.19-1.42) /
1.33 (1.07-1.55), 11 1.29 (1.25-1.67) / 1.42 (1.28-1.53). Measured 2026-12-04,
likewise: 12 1.29 (1.22-1.71) / 1.31 (1.20-1.75); 13 1.55 (1.45-1.75) / 1.63
(1.37-1.95), then 1.49 (1.33-1.55) / 1.44 (1.37-1.55) once each greedy test ran
transformers' generate once per prompt, not twice (its setup cell builds two random
models with the course's 30,522-token vocabulary: 0.9 s, most of it normal_ on the
embeddings). Where the rest goes:
importing matplotlib.pyplot in a kernel is 0.7 s of CPU (seven notebooks plot,
the floor does not), and the first torch.optim optimizer of a process imports
torch._dynamo, about 1 s (09 and 11 train with Adam; a graded kernel, forked
from the zygote, has it already: transformers imports it).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from course.grading.environment import threads

ROOT = Path(__file__).resolve().parent.parent
FLOOR = "import torch\nfrom course import models\nmodel, tokenizer = models.load()\n"


def run_one(path: str) -> None:
    """Child mode: execute one notebook, print seconds and the kernel's peak RSS."""
    if path == "floor":
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(FLOOR)])
    else:
        nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=False).execute()
    seconds = time.perf_counter() - start
    kernel = resource.getrusage(resource.RUSAGE_CHILDREN)  # the kernel, ended
    cpu = kernel.ru_utime + kernel.ru_stime
    print(
        json.dumps(
            {"seconds": seconds, "cpu": cpu, "peak_mib": kernel.ru_maxrss / 1024}
        )
    )


def _measure_once(path: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--one", path],
        env={**os.environ, **threads()},  # as in a grading kernel
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(path: str, repeat: int = 5) -> dict:
    """Seconds as a multiple of the floor, and peak memory, over ``repeat`` pairs.

    Each run of the notebook follows a run of the floor, and its ratio is taken to
    that floor: the machine's speed drifts by a third over minutes here, so a floor
    measured once, at the start, would move every ratio with it. The median pair's
    ratio is reported.
    """
    pairs = [(_measure_once("floor"), _measure_once(path)) for _ in range(repeat)]
    ratios = sorted((run["seconds"] / floor["seconds"], run) for floor, run in pairs)
    ratio, mid = ratios[len(ratios) // 2]
    cpu = sorted(run["cpu"] / floor["cpu"] for floor, run in pairs)
    return {
        "seconds": mid["seconds"],
        "ratio": ratio,
        "spread": (ratios[0][0], ratios[-1][0]),
        "cpu_ratio": cpu[len(cpu) // 2],
        "cpu_spread": (cpu[0], cpu[-1]),
        "peak_mib": max(run["peak_mib"] for _, run in pairs),
        "floor_mib": max(floor["peak_mib"] for floor, _ in pairs),
    }


def main(names: list[str]) -> None:
    print(
        f"{'notebook':28s} {'seconds':>8s} {'x floor':>8s} {'range':>11s} "
        f"{'CPU x floor':>11s} {'range':>11s} {'peak MiB':>9s} {'floor MiB':>9s}",
        flush=True,
    )
    for nb in sorted((ROOT / "source").glob("*/*.ipynb")):
        if names and nb.stem not in names:
            continue
        m = measure(str(nb))
        low, high = m["spread"]
        cpu_low, cpu_high = m["cpu_spread"]
        print(
            f"{nb.stem:28s} {m['seconds']:8.1f} {m['ratio']:8.2f} "
            f"{low:5.2f}-{high:<5.2f} {m['cpu_ratio']:11.2f} "
            f"{cpu_low:5.2f}-{cpu_high:<5.2f} {m['peak_mib']:9.0f} {m['floor_mib']:9.0f}",
            flush=True,
        )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        run_one(sys.argv[2])
    else:
        main(sys.argv[1:])
