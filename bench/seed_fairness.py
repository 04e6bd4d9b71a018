"""Does any seed cost a correct answer a point? Every hidden check, many seeds.

The grader draws each hidden test's seed per student and run (``course.grading.
steps.judge.DrawSeeds``, 0 to 999 999), so a check that fails a correct answer on one
seed in a thousand costs somebody a point. This runs every hidden check of every
assignment on ``--seeds`` seeds drawn from that range, for every correct form the
fixtures know (``harness.correct_forms``: the reference, the alternatives, each in
a helper and a class, and the fixtures' ``FORMS``), and prints, per check, the seeds
swept and every (form, seed) that lost. Checks that cost more than ``--budget``
seconds per form get fewer seeds (the count says how many ran). The training
checks (``harness.SLOW``) need the notebook's model class: the notebook tests
cover them.

``tests/test_checks_seeds.py`` sweeps 207 seeds in CI (67 for a wrong answer on
the costliest checks); this is the big sweep. With ``--mutants`` it sweeps the
fixtures' wrong answers instead (``MUTANTS``): each must keep the message piece
its fixture names on every seed, and every (mutant, seed) that does not is shown.

Run of 2026-12-01 (``--seeds 1000``, budgets 15-150 s a form and check; seeds swept
by every form): 1000 for 03, 04, 06, 08, 09, 10 (but heatmap_random: 49), 05
(dot_product_std_random: 13) and 11's masked_softmax and position_table; 07: 219-255;
11: chunked_attention 972, key_mask 533, fixed_split_heads 391; 01 and 02: 52-1000.
Found and fixed: 05 softmax_random failed ``exp(x - logsumexp(x))`` on 4 seeds
(float32 scores of 3e4 off by up to 1.5e-3, atol 1e-5: the tolerance now follows
the scores' size); 11 masked_softmax_random failed the reference answer on 2 seeds
(float64 scores computed in float32: 2.1e-5 off, atol 1e-5: the float32 result
passes too). After the fixes: no correct form lost a point.

    .venv/bin/python bench/seed_fairness.py --seeds 1000
    .venv/bin/python bench/seed_fairness.py --only 06 --seeds 300
    .venv/bin/python bench/seed_fairness.py --mutants --only 13 --budget 60
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_SHOWN = 8  # failures printed per check


def drawn(n: int, *, salt: int = 0) -> list[int]:
    """``n`` seeds drawn as the grader draws them (fixed here, to rerun)."""
    return random.Random(salt).sample(range(1_000_000), n)


def sweep(assignment: str, seeds: list[int], budget: float) -> dict:
    """``{(cell, check): [fewest seeds swept, [(form, seed, message)], seconds]}``."""
    from harness import answer_namespace, correct_forms, hidden_calls

    out = defaultdict(lambda: [0, [], 0.0])
    for label, answers, only in correct_forms(assignment):
        ns = answer_namespace(assignment, answers)
        for cell, fn, name, kwargs in hidden_calls(assignment):
            if only not in (None, name):
                continue  # a form of another cell: the reference ran this one
            row = out[(cell, fn.__name__)]
            _swept(row, fn, ns[name], kwargs, seeds, budget, label=label, lost=bool)
    return out


def sweep_mutants(assignment: str, seeds: list[int], budget: float) -> dict:
    """As :func:`sweep`, for each fixture mutant on the hidden checks it must
    fail: a (mutant, seed, verdict) where the verdict lacks the mutant's message
    piece (or passes) is a failure."""
    from harness import answer_namespace, fixture_module, has_piece, hidden_calls

    out = defaultdict(lambda: [0, [], 0.0])
    for mutant in fixture_module(assignment).MUTANTS:
        ns = answer_namespace(assignment, {mutant.cell: mutant.code})
        for cell, fn, name, kwargs in hidden_calls(assignment):
            if name != mutant.cell or cell not in mutant.fails:
                continue
            piece = mutant.fails[cell]  # the verdict must hold it

            def lost(message: str, piece=piece) -> bool:
                return not message or not has_piece(message, piece)

            row = out[(cell, fn.__name__)]
            _swept(
                row, fn, ns[name], kwargs, seeds, budget, label=mutant.name, lost=lost
            )
    return out


def _swept(row: list, fn, answer, kwargs: dict, seeds, budget: float, *, label, lost):
    """Run one check on ``answer`` over ``seeds`` until ``budget`` seconds pass,
    adding to ``row`` (:func:`sweep`'s value) each seed whose verdict is
    ``lost(verdict)``."""
    from harness import verdict

    start = time.perf_counter()
    for count, seed in enumerate(seeds, 1):  # noqa: B007 - count after the loop
        message = verdict(fn, answer, kwargs, seed)
        if lost(message):
            row[1].append((label, seed, message[:200]))
        if time.perf_counter() - start > budget:
            break
    row[0] = min(row[0], count) if row[0] else count
    row[2] += time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--budget", type=float, default=120.0, help="s per form")
    parser.add_argument("--only", nargs="*", default=[""], help="prefixes: 06 07")
    parser.add_argument("--salt", type=int, default=0, help="another set of seeds")
    parser.add_argument(
        "--mutants", action="store_true", help="the fixtures' wrong answers instead"
    )
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT / "tests")]
    from course import grading

    seeds = drawn(args.seeds, salt=args.salt)
    lost = 0
    for assignment in grading.assignments():
        if not assignment.startswith(tuple(args.only)):
            continue
        start = time.perf_counter()
        table = (sweep_mutants if args.mutants else sweep)(
            assignment, seeds, args.budget
        )
        print(f"{assignment} ({time.perf_counter() - start:.0f} s)", flush=True)
        for (_, check), (count, failures, seconds) in table.items():
            print(
                f"  {check}: {count} seeds, {len(failures)} lost ({seconds:.0f} s)",
                flush=True,
            )
            for label, seed, message in failures[:MAX_SHOWN]:
                print(f"    {label} seed={seed}: {message}", flush=True)
            lost += len(failures)
    if args.mutants:
        print(f"wrong answers whose mistake went unnamed: {lost}")
    else:
        print(f"correct answers that lost a point: {lost}")


if __name__ == "__main__":
    main()
