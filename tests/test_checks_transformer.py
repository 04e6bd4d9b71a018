"""09's training exercise: correct answers written other ways pass it too.

A correct ``MultiHeadSelfAttention``, ``EncoderBlock`` or training loop written
another way starts from other weights or draws other batches than the reference,
so it trains to another held-out accuracy. Two of ``TRAINING_FORMS`` (the one with
the lowest run in bench/training_margin.py, and one that draws other batches) are
graded here by the checks the notebook's test cells call, on seed 0 as graded.
"""

import pytest
from fixtures.a09 import TRAINING_FORMS
from harness import definitions

from course import grading
from course.checks import transformer as check

GRADED = (
    "out/v/k/q created in reverse, q pre-scaled",
    "fused; held-out set from the training generator",
)


@pytest.mark.parametrize("form", GRADED)
def test_a_correct_answer_written_another_way_passes(form):
    train = definitions(grading.ROOT, "09_build_a_transformer", TRAINING_FORMS[form])[
        "train_tiny_transformer"
    ]
    check.train_both(train)  # as the notebook does; the checks reuse these runs
    check.train_with_positions(train)
    check.train_without_positions(train)
