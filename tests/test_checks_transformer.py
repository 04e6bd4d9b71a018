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


def test_attention_memory_judges_a_whole_float_after_its_type():
    """A whole number of another type (math.pow's float) hears of its type, then
    of any known mistake its number shows; a right float, of its type alone; a
    float that is not whole, of its type alone too."""

    def no_batch_pow(B, H, T, n=4):
        return H * math.pow(T, 2) * n

    for check_fn, args in (
        (check.attention_memory_small, ()),
        (check.attention_memory_random, (0,)),
        (check.attention_memory_random, (7,)),
    ):
        with pytest.raises(CheckFailed, match="not float") as err:
            check_fn(no_batch_pow, *args)
        assert "Also: attention_memory forgot the batch" in str(err.value)
        assert err.value.mistakes == ("no-batch",)
        with pytest.raises(CheckFailed, match="not float") as err:
            check_fn(lambda B, H, T, n=4: float(B * H * T * T * n), *args)
        assert "Also" not in str(err.value) and err.value.mistakes == ()
        with pytest.raises(CheckFailed, match="not float") as err:
            check_fn(lambda B, H, T, n=4: B * H * T * T * n + 0.5, *args)
        assert "Also" not in str(err.value)
    check.attention_memory_random(lambda B, H, T, n=4: B * H * T * T * n, seed=7)


def test_attention_memory_names_a_triangle_and_a_loop_one_short():
    """A loop over the queries that adds the query's index (T(T - 1)/2 or
    T(T + 1)/2 for T * T) is a triangle; a loop over the heads or the batch that
    starts at 1, one short; together, both; the right loops pass."""

    def looped(B, H, T, n=4, *, first=0, triangle=None):
        heads = range(first, H) if first == 1 else range(H)
        per_matrix = T * T if triangle is None else sum(range(triangle, T + triangle))
        return sum(per_matrix * n for _ in range(B) for _ in heads)

    check.attention_memory_small(looped)
    for seed in (0, 7, 904):
        check.attention_memory_random(looped, seed)
        for triangle in (0, 1):
            with pytest.raises(CheckFailed, match="counts a triangle") as err:
                check.attention_memory_random(
                    functools.partial(looped, triangle=triangle), seed
                )
            assert err.value.mistakes == ("triangle-count",)
        with pytest.raises(CheckFailed, match="counts H - 1 of the H") as err:
            check.attention_memory_random(functools.partial(looped, first=1), seed)
        assert err.value.mistakes == ("loop-one-short",)
        with pytest.raises(CheckFailed, match="counts B - 1 of the B") as err:
            check.attention_memory_random(
                lambda B, H, T, n=4: (B - 1) * H * T * T * n, seed
            )
        assert err.value.mistakes == ("loop-one-short",)
        with pytest.raises(CheckFailed, match="Also: attention_memory counts H") as err:
            check.attention_memory_random(
                functools.partial(looped, first=1, triangle=0), seed
            )
        assert err.value.mistakes == ("triangle-count", "loop-one-short")


class _Block(torch.nn.Module):
    """EncoderBlock by hand; pre-LN with the attention's residual from norm1(x)
    (``normed``), post-LN with the feed-forward's residual from x (``from_x``)."""

    def __init__(self, d_model, num_heads, d_ff, norm_first, *, normed, from_x):
        super().__init__()
        self.norm_first, self.normed, self.from_x = norm_first, normed, from_x
        self.attn = _Attention(d_model, num_heads)
        self.norm1 = torch.nn.LayerNorm(d_model)
        self.norm2 = torch.nn.LayerNorm(d_model)
        self.ff = torch.nn.Sequential(
            torch.nn.Linear(d_model, d_ff),
            torch.nn.ReLU(),
            torch.nn.Linear(d_ff, d_model),
        )

    def forward(self, x, mask=None):
        if self.norm_first:
            n = self.norm1(x)
            h = (n if self.normed else x) + self.attn(n, mask)[0]
            return h + self.ff(self.norm2(h))
        a = self.norm1(x + self.attn(x, mask)[0])
        return self.norm2((x if self.from_x else a) + self.ff(a))


def test_encoder_block_names_the_attention_residual_from_norm1_beside_another():
    """Pre-LN with the attention's residual from norm1(x): named; with the post-LN
    feed-forward's residual from x as well, both; the right block passes."""

    def block(**how):
        return functools.partial(_Block, **{"normed": False, "from_x": False, **how})

    check.block_pre_ln(block())
    check.block_random(block(), seed=3)
    with pytest.raises(CheckFailed, match="carries the normalised x") as err:
        check.block_pre_ln(block(normed=True))
    assert err.value.mistakes == ("normed-residual",)
    for seed in (3, 7):
        with pytest.raises(CheckFailed, match="carries the normalised x") as err:
            check.block_random(block(normed=True, from_x=True), seed=seed)
        assert err.value.mistakes == ("normed-residual", "ff-residual-from-x")
