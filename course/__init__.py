"""Attention, by hand: the helper package of the course.

Submodules
----------
models : the course model (embedded MiniLM BERT, or ``COURSE_MODEL``), tiny BERTs.
data : sample texts.
checks : what the test cells of the notebooks call.
viz : bertviz views that draw offline.
grading : the instructor's and self-studier's grading commands.
"""

import os

# The course never talks to a model hub: every load is local.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

__version__ = "0.1.0"

# The Chinese edition's plots: a CJK font once pyplot is loaded (course.fonts).
from . import fonts  # noqa: E402

fonts.follow_language()
