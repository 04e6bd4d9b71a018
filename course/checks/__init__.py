"""What the notebooks' test cells call.

Every check raises :class:`CheckFailed` with a sentence written for the student: what
is wrong, and where a known misconception explains it, its name. IPython shows that
sentence alone, never a traceback into this package or the test cell.

The per-assignment modules (``config``, ``outputs``, ``heads``, ...) hold the checks
of one notebook each. Their oracles are independent of any solution: the model's own
outputs, bertviz's neuron-view model, ``torch.nn`` modules, and torch's softmax.

The package's own modules hold what the checks share, by idea: :mod:`.calls` (the
gateway to student code, and the verdict a failed check raises), :mod:`.compare`
(comparisons with an oracle), :mod:`.lessons` (what an exercise may not use,
turned off while student code runs and read by the grader), :mod:`.inputs` (texts
and random inputs) and :mod:`.evidence` (calls carried out of the kernel as data). Their names are
re-exported here, as the notebooks and the course's spec use them.
"""

from __future__ import annotations

from ..i18n import N_, say  # the marks the checks use, for their callers too
from . import evidence
from .calls import HINTS, CheckFailed, ShortcutUsed, call, fail, given, score_line
from .compare import (
    allclose,
    equal,
    expect_close,
    expect_equal,
    expect_finite,
    expect_shape,
    expect_tensor,
    is_close,
    max_diff,
)
from .inputs import SAMPLE_TEXTS, random_batch, random_tiny_bert

__all__ = ["HINTS", "N_", "SAMPLE_TEXTS", "CheckFailed", "ShortcutUsed", "allclose"]
__all__ += ["call", "equal", "evidence", "expect_close", "expect_equal"]
__all__ += ["expect_finite", "expect_shape", "expect_tensor", "fail"]
__all__ += ["given", "is_close", "max_diff", "random_batch"]
__all__ += ["random_tiny_bert", "say", "score_line"]
