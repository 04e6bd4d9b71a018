"""Flag, for the instructor, a submission whose code reaches past its own cells.

The tests run in the student's own kernel, so an answer cell can replace
``torch.allclose``, a function of ``course.checks``, a builtin, or IPython's error
display. None of that is needed to answer an exercise of this course. The scan
(:func:`course.grading.steps.scan.read`, the same reading the judge decided the test
cells from) names the first student cell that does any of it; every test cell
after it carries a ``TamperingDetected`` error naming the cell, the line and what
it does. Those tests earn 0, and ``python -m course grade`` flags the submission
for the instructor to review.
"""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

from ..cells import error_output, grade_id
from ..enames import TAMPERED
from . import scan


class FlagTampering(NbGraderPreprocessor):
    """Give every test after the first tampering cell a ``TamperingDetected`` error
    (the judge already has, unless it was switched off)."""

    def preprocess(self, nb, resources):
        reading = scan.read(nb, resources)
        if reading.tampering is None:
            return nb, resources
        self.log.warning("tampering: %s", reading.tampering.message)
        verdicts = reading.verdicts(nb)
        for cell in nb.cells:
            ename, message = verdicts.get(grade_id(cell), ("", ""))
            flagged = any(o.get("ename") == TAMPERED for o in cell.get("outputs", []))
            if ename == TAMPERED and not flagged:
                cell.outputs.append(error_output(TAMPERED, message))
        return nb, resources
