"""09's training exercise: correct answers written other ways pass it too.

A correct ``MultiHeadSelfAttention``, ``EncoderBlock`` or training loop written
another way starts from other weights or draws other batches than the reference,
so it trains to another held-out accuracy. Two of ``TRAINING_FORMS`` (the one with
the lowest run in bench/training_margin.py, and one that draws other batches) are
graded here by the checks the notebook's test cells call, on seed 0 as graded.
Then two diagnoses of two mistakes at once: probs averaged over the heads (with
an inverted mask), and attention_memory's T not squared with no bytes.
"""

import functools
import math

import pytest
import torch
from fixtures.a09 import TRAINING_FORMS
from harness import definitions

from course import grading
from course.checks import CheckFailed
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


class _Attention(torch.nn.Module):
    """MultiHeadSelfAttention by hand: probs per head, or their mean over the
    heads (``averaged``), the mask read True = may attend, or inverted."""

    def __init__(self, d_model, num_heads, *, averaged=False, inverted=False):
        super().__init__()
        self.h, self.averaged, self.inverted = num_heads, averaged, inverted
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (
            torch.nn.Linear(d_model, d_model) for _ in range(4)
        )

    def forward(self, x, mask=None):
        B, T, D = x.shape
        q, k, v = (
            p(x).view(B, T, self.h, -1).transpose(1, 2)
            for p in (self.q_proj, self.k_proj, self.v_proj)
        )
        s = q @ k.mT / math.sqrt(D // self.h)
        if mask is not None:
            keep = mask if mask.dim() == 2 else mask[:, None]
            s = s.masked_fill(keep if self.inverted else ~keep, float("-inf"))
        p = s.softmax(-1)
        out = self.out_proj((p @ v).transpose(1, 2).reshape(B, T, D))
        return out, p.mean(1) if self.averaged else p


def _attention(**how):
    return functools.partial(_Attention, **how)


def test_probs_averaged_over_the_heads_are_named_with_what_else_is_wrong():
    """(B, T, T) probs, the heads' mean: named; with the mask inverted as well,
    both are; per-head probs pass."""
    check.mhsa_values(_Attention)
    check.mhsa_random(_Attention, seed=3)
    with pytest.raises(CheckFailed, match="averaged into one map") as err:
        check.mhsa_random(_attention(averaged=True), seed=3)
    assert err.value.mistakes == ("probs-averaged",)
    with pytest.raises(CheckFailed, match="averaged into one map") as err:
        check.mhsa_random(_attention(averaged=True, inverted=True), seed=3)
    assert err.value.mistakes == ("probs-averaged", "mask-inverted")


def test_attention_memory_names_two_mistakes_at_once():
    """T not squared and no bytes: both named, on every case; one mistake alone
    keeps its own verdict; the right number passes."""

    def right(B, H, T, n=4):
        return B * H * T * T * n

    check.attention_memory_small(right)
    check.attention_memory_random(right, seed=0)
    for seed in range(20):
        with pytest.raises(CheckFailed, match="Also: attention_memory grows") as err:
            check.attention_memory_random(lambda B, H, T, n=4: B * H * T, seed)
        assert set(err.value.mistakes) == {"no-bytes", "linear"}
        with pytest.raises(CheckFailed) as err:
            check.attention_memory_random(lambda B, H, T, n=4: B * H * T * T, seed)
        assert err.value.mistakes == ("no-bytes",)
