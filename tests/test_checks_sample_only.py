"""Answers fitted to the first input fail every visible test on "the sample text".

The cheat: an answer that returns, for every call, what the correct answer returned
for the first call (as if its numbers were hard-coded for the sample text). Each
visible check below runs a second input, so it must reject the cheat, while the
correct answer passes.
"""

import copy
import importlib
import math

import pytest
import torch
import torch.nn.functional as F
from harness import reference_answers
from torch import nn

from course import grading
from course.checks import CheckFailed

CASES = {
    "03_head_slicing": ("heads", {"project_head": ["project_head_course"]}),
    "04_split_heads": (
        "split",
        {
            "split_heads": ["split_heads_shape", "split_heads_bertviz"],
            "merge_heads": ["merge_heads_shape", "merge_heads_values"],
        },
    ),
    "05_softmax_and_scaling": (
        "softmax",
        {
            "attention_scores": ["attention_scores_values"],
            "attention_weights": ["attention_weights_rows", "attention_weights_values"],
        },
    ),
    "06_manual_attention": (
        "attention",
        {
            "head_attention": [
                "head_attention_shapes",
                "head_attention_probs",
                "head_attention_context",
            ],
            "multi_head_attention": [
                "multi_head_attention_probs",
                "multi_head_attention_context",
            ],
        },
    ),
    "07_full_layer": (
        "layer",
        {
            "embeddings_forward": ["embeddings_forward_values"],
            "attention_block": ["attention_block_values"],
            "feed_forward": ["feed_forward_values"],
            "bert_layer": ["bert_layer_values"],
        },
    ),
    "10_visualize": (
        "pictures",
        {"previous_token_heads": ["previous_token_heads_model"]},
    ),
}
PARAMS = [
    (a, fn, check)
    for a, (_, fns) in CASES.items()
    for fn, checks in fns.items()
    for check in checks
]


def _answers(assignment: str) -> dict:
    ns = {"torch": torch, "F": F, "nn": nn, "math": math}
    for name, code in reference_answers(grading.ROOT, assignment).items():
        try:
            exec(compile(code, name, "exec"), ns)
        except Exception:  # noqa: BLE001 - cells that need the notebook's variables
            pass
    return ns


def _first_answer_only(fn):
    seen = []

    def cheat(*args, **kwargs):
        if not seen:
            seen.append(fn(*args, **kwargs))
        return copy.deepcopy(seen[0])

    return cheat


@pytest.mark.parametrize("assignment,fn,check", PARAMS)
def test_sample_only_answer_fails(assignment, fn, check):
    module = importlib.import_module(f"course.checks.{CASES[assignment][0]}")
    real = _answers(assignment)[fn]
    getattr(module, check)(real)  # the correct answer passes
    with pytest.raises(CheckFailed):
        getattr(module, check)(_first_answer_only(real))
