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
