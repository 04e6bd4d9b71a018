"""Whether nbgrader runs this kernel: the one answer that hints, worked answers and
progress ask before they give or record anything.

nbgrader sets ``NBGRADER_EXECUTION`` (``"validate"`` or ``"autograde"``) for the
kernels it starts; the course's grader also sets ``COURSE_EVIDENCE`` for the
kernels whose checks record evidence (:mod:`course.checks.evidence`).
"""

from __future__ import annotations

import os

#: Set by nbgrader while it validates or autogrades a notebook.
NBGRADER = "NBGRADER_EXECUTION"
#: Set by the course's grader where the checks record evidence.
EVIDENCE = "COURSE_EVIDENCE"


def nbgrader_runs() -> bool:
    """``True`` in a kernel that nbgrader validates or grades: no hint, worked
    answer or progress record is given or kept there."""
    return bool(os.environ.get(NBGRADER)) or os.environ.get(EVIDENCE) == "1"
