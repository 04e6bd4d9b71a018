"""course.checks core: verdicts, tolerances, diagnosis, forbidden shortcuts."""

import pytest
import torch

from course import checks
from course.checks import CheckFailed


def test_call_turns_not_implemented_into_a_sentence():
    def todo(x):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="not written yet"):
        checks.call(todo, 1)


def test_call_reports_the_crash_and_not_a_deep_traceback():
    def broken(x):
        return x @ torch.ones(3, 2)

    with pytest.raises(CheckFailed, match="raised RuntimeError") as info:
        checks.call(broken, torch.ones(2, 2))
    assert info.value._render_traceback_()[0].startswith("CheckFailed: ")


def _no_keepdim(scores):
    return scores - scores.max(-1).values  # (B, T, T) - (B, T)


def _masked(scores, mask):
    return scores + mask  # (B, H, T, T) + (B, T)


@pytest.mark.parametrize(
    "fn, inputs, hint, not_hint",
    [
        (_no_keepdim, (torch.randn(2, 4, 4),), "keepdim=True", "mask"),
        (lambda Q: Q @ Q.T, (torch.randn(2, 3, 4, 5),), ".transpose(-2, -1)", "mask"),
        (_masked, (torch.randn(2, 3, 4, 4), torch.ones(2, 4)), "(B, 1, T, T)", "keepdim"),
        (_masked, (torch.randn(2, 3, 4, 4), torch.rand(2, 4) < 0.5), "(B, 1, T, T)", "keepdim"),
        (_masked, (torch.randn(2, 3, 4, 4), torch.tensor([[0.0, -1e9, 0, 0]] * 2)), "(B, 1, T, T)", "keepdim"),
        (_masked, (torch.randn(2, 3, 4, 4), torch.randn(2, 4)), "keepdim", "mask"),
    ],
)  # fmt: skip
def test_a_shape_error_gets_the_hint_of_its_inputs(fn, inputs, hint, not_hint):
    """The mask's broadcast hint only where a mask was given (tell by its values)."""
    with pytest.raises(CheckFailed) as info:
        checks.call(fn, *inputs, name="f")
    assert hint in str(info.value) and not_hint not in str(info.value)


def test_call_rejects_non_callables():
    with pytest.raises(CheckFailed, match="should be a function"):
        checks.call(42)


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


def test_warm_up_runs_the_visible_tests_inputs_before_any_test():
    """What a zygote runs before it forks: later calls of the checks are answered
    from those runs."""
    from course.checks import layer, oracles, warm

    for cached in (oracles._course_case, oracles._sample_qk, layer._course_case):
        cached.cache_clear()
    warm.warm_up()
    made = [c.cache_info().misses for c in (oracles._course_case, layer._course_case)]
    oracles.course_case(padded=True)
    oracles.course_case(text=checks.SAMPLE_TEXTS[1])
    layer.course_case(padded=True)
    layer.course_case(texts=layer.UNPADDED[1])
    assert [
        c.cache_info().misses for c in (oracles._course_case, layer._course_case)
    ] == made


def test_oracle_runs_are_made_once_and_each_caller_gets_its_own_tensors():
    """course_case and sample_qk run the model once per input; a caller that
    changes its tensors in place (as a student's call may) changes no one else's."""
    from course import data
    from course.checks import layer, oracles

    first = oracles.course_case(padded=True)
    first.hidden.add_(1.0)
    first.mask.zero_()
    again = oracles.course_case(padded=True)
    assert again.mask.sum() > 0 and not torch.equal(first.hidden, again.hidden)
    assert again.self_attn is first.self_attn  # modules stay shared, as the model is
    fresh = oracles._course_case.__wrapped__(True, data.SAMPLE_TEXT)  # not cached
    assert torch.equal(fresh.probs, again.probs)
    assert torch.equal(fresh.context, again.context)

    block = layer.course_case()
    block.states[0].zero_()
    assert layer.course_case().states[0].abs().sum() > 0

    queries, _ = oracles.sample_qk()
    queries.zero_()
    assert oracles.sample_qk()[0].abs().sum() > 0


def _ext_query_axis(attention_mask, dtype):
    m = attention_mask[:, None, :, None].to(dtype)  # (B, 1, T, 1): along the queries
    return (1.0 - m) * torch.finfo(dtype).min


def _ext_right(attention_mask, dtype):
    return (1.0 - attention_mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


def test_a_mask_along_the_wrong_axis_is_named_by_its_shape():
    """06's extended_mask that pads the queries, not the keys: named with its key;
    the control: the right one passes."""
    from course.checks import attention

    with pytest.raises(CheckFailed) as err:
        attention.extended_mask_random(_ext_query_axis, seed=3)
    assert "runs along the queries" in str(err.value)
    assert err.value.mistakes == ("mask-query-axis",)
    attention.extended_mask_random(_ext_right, seed=3)
