"""What a graded notebook tells the instructor: the flags of one submission.

Read on the worker that graded it, from what the grading steps wrote as data: the
names of the error outputs they gave cells (:mod:`course.grading.enames`) and the
notebook's :data:`KEY` metadata, where the output limits record that they cut
output (:class:`course.grading.steps.execute.GuardedExecute`,
:class:`LimitOutput`). Nothing a student's code prints is read.
"""

from __future__ import annotations

from nbgrader.preprocessors import LimitOutput as NbgraderLimitOutput

from ..cells import grade_id
from ..enames import DEAF, KERNEL_DIED, NOT_RUN, TAMPERED

KEY = "course_grading"  # the notebook metadata the grading steps write
TRUNCATED = "output_truncated"  # ... its flag: an output limit cut output


def mark_truncated(nb) -> None:
    """Record in ``nb`` that an output limit cut some of its output."""
    nb.metadata.setdefault(KEY, {})[TRUNCATED] = True


class LimitOutput(NbgraderLimitOutput):
    """nbgrader's ``LimitOutput``, which records in the notebook when it cut
    printed output (its line limit; a traceback it shortens is no flag)."""

    def preprocess(self, nb, resources):
        before = [_size(cell) for cell in nb.cells]
        nb, resources = super().preprocess(nb, resources)
        if [_size(cell) for cell in nb.cells] != before:
            mark_truncated(nb)
        return nb, resources


def _size(cell) -> tuple:
    """The lengths of a cell's printed outputs (what the line limit cuts)."""
    outputs = cell.get("outputs", [])
    return tuple(len(o.text) for o in outputs if o.get("output_type") == "stream")


def flags(nb: dict) -> list[str]:
    """What a graded notebook says the instructor should know, once each."""
    out = []
    if nb.get("metadata", {}).get(KEY, {}).get(TRUNCATED):
        out.append("output was truncated")
    for k, cell in enumerate(nb.get("cells", [])):
        name = grade_id(cell, f"#{k}")
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                out += _error_flags(name, output)
    return list(dict.fromkeys(out))  # once each, in order


def _error_flags(name: str, output: dict) -> list[str]:
    ename, evalue = output.get("ename", ""), output.get("evalue", "")
    if ename == TAMPERED:
        return [f"tampering: {evalue.split(':')[0]}"]
    if ename == NOT_RUN:
        return [f"later cells {evalue}"]
    if ename in (KERNEL_DIED, DEAF):
        return [f"cell {name}: {evalue or 'timed out and was interrupted'}"]
    if ename == "MemoryError" or "allocate memory" in evalue:
        return [f"cell {name} ran out of memory (the per-kernel limit)"]
    return []
