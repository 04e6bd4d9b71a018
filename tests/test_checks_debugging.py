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


def _split(x, H):
    B, T, D = x.shape
    return x.view(B, T, H, D // H).transpose(1, 2)


def _case(seed: int, t_is_d: bool):
    """A random case of fixed_split_heads whose T equals d, or not."""
    from course.checks.oracles import random_cases

    for case in random_cases(seed, heads=(2, 3, 4)):
        if (case.hidden.shape[1] == case.d) == t_is_d:
            return case
    raise AssertionError(f"no case with T == d {t_is_d} on seed {seed}")


def test_fixed_split_heads_names_t_and_d_swapped():
    """Q and K split as (B, H, d, T), GPT-2's layout for keys, are named by the
    shape where T != d and by the attention where T == d; swapped back, a second
    mistake (the transpose before the reshape) is named too. The right split
    passes both cases (the control)."""

    def d_t(x, H):
        return _split(x, H).permute(0, 1, 3, 2)

    def first_then_swap(x, H):
        B, T, D = x.shape
        return x.transpose(1, 2).reshape(B, H, T, D // H).mT

    case = _case(2, t_is_d=False)
    debugging._expect_split(_split, case)
    for wrong, keys in (
        (d_t, ("heads-d-t",)),
        (first_then_swap, ("heads-d-t", "transpose-before-reshape")),
    ):
        with pytest.raises(CheckFailed, match=r"laid out \(B, H, d, T\)") as err:
            debugging._expect_split(wrong, case)
        assert err.value.mistakes == keys, wrong.__name__
    # Where T == d, a transpose before the reshape gives the same numbers as T and
    # d swapped (both are named, as either), and swapped back it is right.
    case = _case(2, t_is_d=True)
    debugging._expect_split(_split, case)
    with pytest.raises(CheckFailed, match=r"laid out \(B, H, d, T\)") as err:
        debugging._expect_split(d_t, case)
    assert set(err.value.mistakes) == {"heads-d-t", "transpose-before-reshape"}
    with pytest.raises(CheckFailed, match="laid out") as err:
        debugging.fixed_split_heads_values(d_t)
    assert err.value.mistakes == ("heads-d-t",)


def _online(Q, K, V, c, mask=None, *, divisor=None, use_mask=True):
    """One pass over the key blocks, a running max (0 while still -inf) and
    rescaled running sums: exact, unless ``divisor`` (instead of sqrt(d)) or the
    mask left unused."""
    divisor = math.sqrt(Q.shape[-1]) if divisor is None else divisor(Q.shape[-1])
    m = torch.full((*Q.shape[:-1], 1), -math.inf, dtype=Q.dtype)
    total, acc = torch.zeros_like(m), 0
    for j in range(0, K.shape[-2], c):
        s = Q @ K[..., j : j + c, :].mT / divisor
        if use_mask and mask is not None:
            s = s.masked_fill(~mask[..., j : j + c], -math.inf)
        new = torch.maximum(m, s.amax(-1, keepdim=True))
        safe = new.masked_fill(new == -math.inf, 0.0)
        p, r = (s - safe).exp(), (m - safe).exp()
        total, acc = (
            total * r + p.sum(-1, keepdim=True),
            acc * r + p @ V[..., j : j + c, :],
        )
        m = new
    return acc / total


@pytest.mark.parametrize("seed", range(3))
def test_a_mask_ignored_and_a_scale_by_d_are_named_alone_and_together(seed):
    """The mask ignored, the scores divided by d, and both at once: each named
    by its keys (the pair by both); the right online softmax passes."""
    debugging.chunked_attention_mask(_online)
    debugging.chunked_attention_random(_online, seed)

    def by_d(d):
        return d

    wrongs = {
        ("chunk-mask-ignored",): lambda *a, **k: _online(*a, **k, use_mask=False),
        ("by-d",): lambda *a, **k: _online(*a, **k, divisor=by_d),
        ("by-d", "chunk-mask-ignored"): lambda *a, **k: _online(
            *a, **k, divisor=by_d, use_mask=False
        ),
    }
    for keys, wrong in wrongs.items():
        with pytest.raises(CheckFailed) as err:
            debugging.chunked_attention_mask(wrong)
        assert err.value.mistakes == keys, str(err.value)
        with pytest.raises(CheckFailed) as err:
            debugging.chunked_attention_random(wrong, seed)
        assert set(err.value.mistakes) == set(keys), str(err.value)
        # a mistake named on one case is not said again beside a later one's
        assert str(err.value).count("divides by d") == ("by-d" in keys), str(err.value)
