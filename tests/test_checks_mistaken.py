"""course.checks.mistaken: wrong answers built one and two wrong steps at a time."""

import math

import pytest
import torch

from course.checks import CheckFailed
from course.checks.compare import expect_close
from course.checks.mistaken import Step, fewest, mistaken
from course.i18n import N_

DOUBLED = N_("doubled")  # not catalog sentences: say() passes them through
NEGATED = N_("negated")
SHIFTED = N_("shifted")
SKIPPED = N_("skipped")


def _steps():
    """x -> 2x? -> x + 1: a doubling step and a shifting step, each with its
    mistakes."""
    return [
        Step(
            right=lambda st: {**st, "x": st["x"] * 2},
            wrong={
                DOUBLED: lambda st: st,  # forgot to double
                NEGATED: (
                    lambda st: {**st, "x": -st["x"] * 2},
                    lambda st: {**st, "x": -st["x"]},
                ),
            },
        ),
        Step(
            right=lambda st: {**st, "x": st["x"] + 1},
            wrong={
                SHIFTED: lambda st: {**st, "x": st["x"] - 1},
                SKIPPED: lambda st: None,  # cannot happen on this input
            },
        ),
    ]


def test_one_wrong_step_then_two_from_different_steps():
    x = torch.tensor([1.0, 2.0])
    singles, pairs = mistaken({"x": x}, _steps(), result=lambda st: st["x"])
    assert set(singles) == {DOUBLED, NEGATED, SHIFTED}
    assert torch.equal(singles[DOUBLED][0], x + 1)
    assert [v.tolist() for v in singles[NEGATED]] == [[-1.0, -3.0], [0.0, -1.0]]
    assert torch.equal(singles[SHIFTED][0], 2 * x - 1)
    # a pair takes one mistake from each step, never two from one step
    assert len(pairs) == 2
    doubled_shifted = next(k for k in pairs if "doubled" in k)
    assert "shifted" in doubled_shifted and "Also" in doubled_shifted
    assert torch.equal(pairs[doubled_shifted][0], x - 1)
    assert not any("negated" in k and "doubled" in k for k in pairs)


def test_a_mistake_said_before_is_left_out_of_a_pair_s_verdict():
    """With ``said`` (the keys an earlier verdict named), a pair that holds one of
    them is said as its other mistake alone; its numbers stay the pair's."""
    x = torch.tensor([1.0, 2.0])
    doubled = N_("doubled", mistake="doubled")
    steps = _steps()
    steps[0] = Step(right=steps[0].right, wrong={doubled: lambda st: st})
    _, pairs = mistaken({"x": x}, steps, result=lambda st: st["x"], said=("doubled",))
    assert SHIFTED in pairs and torch.equal(pairs[SHIFTED][0], x - 1)
    assert not any("Also" in k for k in pairs)


def test_most_one_gives_the_singles_alone():
    tiers = mistaken({"x": torch.ones(1)}, _steps(), result=lambda st: st["x"], most=1)
    assert len(tiers) == 1


def test_expect_close_names_the_fewest_mistakes_that_fit():
    """A value a single mistake gives is named by it, even where a pair gives the
    same numbers; a pair is named only when no single fits. Control: the right
    value passes."""
    x = torch.tensor([1.0, 2.0])
    tiers = mistaken({"x": x}, _steps(), result=lambda st: st["x"])
    tiers[1][N_("a pair that equals a single")] = (x + 1,)
    expect_close(2 * x + 1, 2 * x + 1, "y", diagnose=tiers)
    with pytest.raises(CheckFailed) as single:
        expect_close(x + 1, 2 * x + 1, "y", diagnose=tiers)
    assert "doubled" in str(single.value) and "pair" not in str(single.value)
    with pytest.raises(CheckFailed) as pair:
        expect_close(x - 1, 2 * x + 1, "y", diagnose=tiers)
    assert "doubled" in str(pair.value) and "shifted" in str(pair.value)


def test_fewest_returns_every_smallest_set_that_fits():
    # a count of 2 * 3 * 5 = 30 that an answer gives as 5: the factors 2 and 3
    # left out, or the one factor 6 (= 2 * 3) left out: the single wins
    factors = {"two": 2, "three": 3, "six": 6, "five": 5}

    def fits(chosen):
        return 30 // math.prod(factors[m] for m in chosen) == 5

    assert fewest(tuple(factors), fits) == [("six",)]
    assert fewest(("two", "three", "five"), fits) == [("two", "three")]
    assert fewest(("two", "three", "five"), fits, most=1) == []
    assert fewest(("two", "six", "three"), lambda c: len(c) == 2) == [
        ("two", "six"),
        ("two", "three"),
        ("six", "three"),
    ]
