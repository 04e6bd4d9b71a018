"""course.checks.compare: an answer against its oracle, shapes and values, the
misconception named by the numbers an answer gives."""

import pytest
import torch

from course import checks
from course.checks import CheckFailed, compare
from course.checks.calls import both
from course.checks.oracles import BY_D, NO_SCALE, PROBS_T
from course.i18n import mistakes_of, say


def test_expect_shape_names_the_shapes():
    with pytest.raises(CheckFailed, match=r"shape \(2, 3\).*shape \(3, 2\)"):
        checks.expect_shape(torch.zeros(3, 2), (2, 3), "x")
    with pytest.raises(CheckFailed, match="torch.Tensor"):
        checks.expect_shape([[0.0]], (1, 1), "x")


def test_expect_close_accepts_float64_and_float32_noise():
    expected = torch.randn(4, 5)
    checks.expect_close(expected.double() + 1e-6, expected, "x")


def test_expect_close_names_the_matching_misconception():
    expected = torch.randn(4, 4)
    wrong = expected.T.contiguous()
    with pytest.raises(CheckFailed, match="transposed"):
        checks.expect_close(wrong, expected, "x", diagnose={"transposed": wrong})


def test_expect_close_names_a_misconception_from_any_of_its_values():
    """A mistake whose ways of writing differ in their numbers (a tuple of values)
    is named whichever of them the answer gives."""
    expected = torch.randn(4, 4)
    ways = (expected.T.contiguous(), expected * 2)
    for got in ways:
        with pytest.raises(CheckFailed, match="blocks"):
            checks.expect_close(got, expected, "x", diagnose={"blocks": ways})
    with pytest.raises(CheckFailed, match="largest difference"):
        checks.expect_close(expected + 1, expected, "x", diagnose={"blocks": ways})


def test_expect_close_builds_a_callable_diagnosis_only_for_a_wrong_value():
    """A right value never calls it (a correct answer pays nothing for the
    mistakes a check knows); a wrong one is named from what it returns."""
    want = torch.ones(3)
    calls = []

    def diagnose():
        calls.append(1)
        return {"twice as large": want * 2}

    checks.expect_close(want.clone(), want, "x", diagnose=diagnose)
    assert calls == []
    with pytest.raises(CheckFailed, match="twice as large"):
        checks.expect_close(want * 2, want, "x", diagnose=diagnose)
    assert calls == [1]


def test_expect_close_reports_nan_and_size_of_error():
    expected = torch.zeros(3)
    with pytest.raises(CheckFailed, match="NaN"):
        checks.expect_close(torch.tensor([0.0, float("nan"), 0.0]), expected, "x")
    with pytest.raises(CheckFailed, match="largest difference is 0.5"):
        checks.expect_close(torch.tensor([0.0, 0.5, 0.0]), expected, "x")


def test_expect_close_rejects_integer_tensors():
    with pytest.raises(CheckFailed, match="floats"):
        checks.expect_close(torch.zeros(2, dtype=torch.long), torch.zeros(2), "x")


def test_grading_uses_references_taken_before_student_code(monkeypatch):
    monkeypatch.setattr(torch, "allclose", lambda *a, **k: True)
    with pytest.raises(CheckFailed):
        checks.expect_close(torch.ones(2), torch.zeros(2), "x")


def test_alternative_pairs_say_their_shared_first_mistake_once():
    first, second, third = NO_SCALE, BY_D, PROBS_T
    text = compare.either([both(first, second), both(first, third)])
    assert text.count(say(first)) == 1
    assert f"Also: {say(second)} Or: {say(third)}" in text
    assert set(mistakes_of(text)) == {
        key for m in (first, second, third) for key in mistakes_of(m)
    }
    # control: pairs whose first mistakes differ are each said whole
    text = compare.either([both(first, second), both(third, second)])
    assert text.count(say(second)) == 2
