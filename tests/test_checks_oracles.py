"""checks.oracles.Case: the one oracle case, whose values are the model's own."""

import torch
import torch.nn.functional as F

from course.checks import oracles


def test_a_case_s_values_are_the_ones_its_model_computed():
    """What the hooks kept agrees with the layer's modules run again by hand:
    the self-attention's output, the block's output, the next hidden state."""
    for case in oracles.random_cases(seed=3, n=2):
        context = case.context_of(case.hidden)  # (B, T, D)
        torch.testing.assert_close(context, case.context)
        out = case.block.attention.output
        torch.testing.assert_close(out(context, case.hidden), case.attn_out)
        ffn = case.block.output
        up = F.gelu(case.block.intermediate.dense(case.attn_out))
        torch.testing.assert_close(ffn(up, case.attn_out), case.after)
        assert case.states[case.layer + 1] is case.after
        B, H, T, _ = case.probs.shape
        assert (B, T) == tuple(case.ids.shape) and H == case.H


def test_token_types_reach_the_model():
    """The control: the same batch with other token types gives other values."""
    case = next(oracles.random_cases(seed=5, n=1))
    other = oracles.Case(
        case.model, case.layer, case.ids, case.mask, types=torch.ones_like(case.ids)
    )
    assert not torch.allclose(other.hidden, case.hidden)


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
