"""course.checks.debugging, chunked attention: the memory check sees a whole
(Tq, Tk) matrix whatever code builds it, and passes a blockwise answer; its oracle
is torch's fused attention."""

import math

import pytest
import torch

from course.checks import CheckFailed, debugging

WHOLE = {
    "@": lambda Q, K, V, c, mask=None: (
        torch.softmax(Q @ K.mT / math.sqrt(Q.shape[-1]), -1) @ V
    ),
    "einsum": lambda Q, K, V, c, mask=None: torch.einsum(
        "...qk,...kd->...qd",
        torch.einsum("...qd,...kd->...qk", Q, K)
        .div(math.sqrt(Q.shape[-1]))
        .softmax(-1),
        V,
    ),
    "cat of blocks": lambda Q, K, V, c, mask=None: (
        torch.cat([Q @ K[..., j : j + c, :].mT for j in range(0, K.shape[-2], c)], -1)
        .div(math.sqrt(Q.shape[-1]))
        .softmax(-1)
        @ V
    ),
}


@pytest.mark.parametrize("form", sorted(WHOLE))
def test_a_whole_score_matrix_fails_in_any_form(form):
    with pytest.raises(CheckFailed, match="as large as the whole score matrix"):
        debugging.chunked_attention_memory(WHOLE[form])


def _blockwise(Q, K, V, c, mask=None):
    """Two passes over the key blocks (max, then sums): exact, never whole."""
    scale = 1 / math.sqrt(Q.shape[-1])
    m = (
        torch.stack(
            [(Q @ K[..., j : j + c, :].mT).amax(-1) for j in range(0, K.shape[-2], c)]
        ).amax(0)[..., None]
        * scale
    )
    num, den = 0, 0
    for j in range(0, K.shape[-2], c):
        p = (Q @ K[..., j : j + c, :].mT * scale - m).exp()
        num, den = num + p @ V[..., j : j + c, :], den + p.sum(-1, keepdim=True)
    return num / den


def test_a_blockwise_answer_passes_values_and_memory():
    debugging.chunked_attention_values(_blockwise)
    debugging.chunked_attention_memory(_blockwise)


def test_the_oracle_is_softmax_attention():
    gen = torch.Generator().manual_seed(0)
    Q, K, V = (
        torch.randn(2, n, 4, generator=gen, dtype=torch.float64) for n in (3, 5, 5)
    )
    mask = torch.rand(2, 3, 5, generator=gen) < 0.5
    mask[..., 0] = True
    s = (Q @ K.mT / 2).masked_fill(~mask, -math.inf)
    assert torch.allclose(debugging.oracle(Q, K, V, mask), s.softmax(-1) @ V)
