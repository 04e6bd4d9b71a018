"""Benchmark: how far above 09's accuracy threshold correct answers train.

Exercise 3 of 09_build_a_transformer trains a tiny causal transformer built from
the student's own ``MultiHeadSelfAttention`` and ``EncoderBlock``; the grader
wants held-out accuracy >= 0.85 with positions and <= 0.50 without. A correct
answer written another way starts from other weights (modules created in another
order), rounds differently (fused projections, einsum, float64) or draws other
training batches, so it lands elsewhere than the reference. This trains each of
``TRAINING_FORMS`` in tests/fixtures/a09.py, with the notebook's own recipe, on
several seeds, and measures held-out accuracy as the grader does
(``course.checks.transformer``).

    .venv/bin/python bench/training_margin.py            # seeds 0-7
    .venv/bin/python bench/training_margin.py --seeds 20

Measured 2026-12-01 (8 answers x seeds 0-7, 64 runs each way), lowest with / highest
without positions:

* 60 steps of 64, d_ff = 4 * d_model (the old recipe), threshold 0.90: 0.857 / 0.27;
  two runs of the bmm answer (seeds 2, 3) and none of the reference fell under 0.90.
* 100 steps of 32, d_ff = 2 * d_model (the notebook's now), threshold 0.85:
  0.927 (reversed projections, seed 4; the reference's lowest 0.965) / 0.266, a
  margin of +0.077 over 0.85 and 0.234 under 0.50. A run costs about 0.65 of the
  old one's CPU time. Along the way: 80 steps of 32 dipped to 0.84, d_model 32
  to 0.40 (unstable), lr 1e-2 to 0.81, 120 steps of 16 to 0.90.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fixtures.a09 import TRAINING_FORMS  # noqa: E402
from harness import definitions  # noqa: E402

from course import grading  # noqa: E402
from course.checks import transformer as check  # noqa: E402

ASSIGNMENT = "09_build_a_transformer"
WITH, WITHOUT = check.WITH_POSITIONS, check.WITHOUT_POSITIONS


def accuracies(answers: dict[str, str], seed: int) -> tuple[float, float]:
    """Held-out accuracy with and without positions of one answer on one seed."""
    train = definitions(grading.ROOT, ASSIGNMENT, answers)["train_tiny_transformer"]
    with_positions = check._held_out_accuracy(train(seed, use_positions=True)[0], 0)
    without = check._held_out_accuracy(train(seed, use_positions=False)[0], 1)
    return with_positions, without


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8, help="seeds 0..N-1")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as in a grading kernel
    seeds = range(args.seeds)
    print(f"{'answer':58s} " + " ".join(f"{s:>9d}" for s in seeds))
    lowest, highest, start = 1.0, 0.0, time.perf_counter()
    for name, answers in TRAINING_FORMS.items():
        row = [accuracies(answers, seed) for seed in seeds]
        lowest = min(lowest, *(w for w, _ in row))
        highest = max(highest, *(wo for _, wo in row))
        print(f"{name[:58]:58s} " + " ".join(f"{w:.3f}/{wo:.2f}" for w, wo in row))
    runs = 2 * len(TRAINING_FORMS) * len(seeds)
    print(f"\nwith/without positions; {runs} runs, {time.perf_counter() - start:.0f} s")
    print(
        f"lowest with positions {lowest:.3f}: margin {lowest - WITH:+.3f} over {WITH}"
    )
    print(
        f"highest without positions {highest:.3f}: margin {WITHOUT - highest:+.3f} "
        f"under {WITHOUT}"
    )


if __name__ == "__main__":
    main()
