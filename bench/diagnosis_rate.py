"""How often a fixture mistake gets a verdict that names it.

Counts, over every mutant in ``tests/fixtures`` and every test cell *of its own
exercise* that it must lose (cells of later exercises that merely call the wrong
answer are not counted), the cells whose expected message piece names the
mistake: not empty (any verdict) and not a generic mismatch ("does not match",
"largest difference"). The pieces
themselves are enforced by ``tests/test_autograde.py`` (a real nbgrader run) and
``tests/test_checks_seeds.py`` (every seed), so this is the rate those tests hold.

Each mutant that is a function or a class also counts in two more forms (the same
mistake inside a helper, inside a class: ``harness.other_forms``), whose hidden
test cells ``tests/test_checks_seeds.py`` checks too.

    .venv/bin/python bench/diagnosis_rate.py
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GENERIC = ("does not match", "largest difference", "lost points")


def rates(*, forms: bool = False) -> dict[str, tuple[int, int]]:
    """``{assignment module: (named, total)}`` over the fixtures' mutants (and, with
    ``forms``, over their other code forms instead)."""
    sys.path[:0] = [str(ROOT / "tests")]
    from harness import other_forms

    out = {}
    for path in sorted((ROOT / "tests" / "fixtures").glob("a[0-9][0-9].py")):
        module = importlib.import_module(f"fixtures.{path.stem}")
        mutants = module.MUTANTS
        if forms:
            mutants = [f for m in mutants for f in other_forms(m)]
        pieces = [
            piece
            for m in mutants
            for cell, piece in m.fails.items()
            if cell.startswith(f"test_{m.cell}_")
        ]
        named = [
            p
            for p in pieces
            if p and not any(g in "".join(p) for g in GENERIC)  # a tuple: each part
        ]
        out[path.stem] = (len(named), len(pieces))
    return out


def main() -> None:
    for forms in (False, True):
        table = rates(forms=forms)
        print("other code forms (helper, class):" if forms else "the fixtures:")
        for name, (named, total) in table.items():
            print(f"  {name}: {named}/{total} named")
        named = sum(n for n, _ in table.values())
        total = sum(t for _, t in table.values())
        print(
            f"  all: {named}/{total} = {named / total:.1%} of lost test cells name it"
        )


if __name__ == "__main__":
    main()
