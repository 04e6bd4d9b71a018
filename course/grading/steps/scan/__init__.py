"""The grader's reading of a submission's source, out of the kernel.

The checks turn library shortcuts off inside the kernel while an answer runs, and
the tests run in the student's kernel, where an answer cell can replace
``torch.allclose``, a check, a builtin or IPython's error display. This package
reads the cells a student can write, as source, in the grader's process, and
lists what they do that no answer of this course needs:

* :mod:`.source`: one parser (IPython's magics, ``!shell`` and ``?`` included) and
  the role of each cell;
* :mod:`.binder`: one binder of names to modules (imports, ``__import__``,
  ``importlib``, aliases);
* :mod:`.deny`: one deny list, each entry with why;
* :mod:`.tampering`: code that reaches past its own cell (every later test earns
  0, and the submission is flagged for the instructor);
* :mod:`.lessons`: one :class:`Lesson` per exercise (that exercise's tests earn 0);
* :mod:`.reading`: :func:`read`, the ordered verdicts the judge and
  ``FlagTampering`` both use.

A deny list flags; it is not the defence. Verdicts come from the grader's
process (:mod:`course.grading.steps.judge`) and kernels run in a sandbox.
"""

from __future__ import annotations

from .binder import bind
from .lessons import LESSONS, Lesson, defined
from .reading import Finding, Reading, read
from .source import parse
from .tampering import Tampering


def scan_source(
    source: str, imported=(), protected: dict[str, str] | None = None
) -> list[tuple[int, str]]:
    """``(line, what)`` for each construct of one cell's ``source`` that tampers.

    ``imported`` are names bound by imports anywhere in the notebook (changing
    their attributes is tampering); ``protected`` maps the names the given cells
    import for the tests to what they import (binding them to anything else is
    tampering; importing the same thing again is fine).
    """
    tree = parse(source)
    if tree is None:
        return []
    start = {name: name for name in imported}
    names = bind([tree], aliases=True, start=start)
    scanner = Tampering(names, dict(protected or {}), own=defined(tree))
    scanner.visit(tree)
    return sorted(set(scanner.found))


def imported_names(sources: list[str]) -> dict[str, str]:
    """``{name: module or object}`` for every name an ``import`` in these cells binds."""
    return bind([t for t in map(parse, sources) if t is not None])


__all__ = ["LESSONS", "Finding", "Lesson", "Reading", "imported_names", "read"]
__all__ += ["scan_source"]
