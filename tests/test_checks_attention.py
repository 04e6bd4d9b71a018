"""course.checks.attention: notebook 06's checks (one head, then all heads)."""

import functools
import math

import pytest
import torch

from course.checks import CheckFailed


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


def _head(
    hidden,
    self_attn,
    head,
    attention_mask=None,
    *,
    v_bias="value",
    rows=False,
    v_from_h=False,
    swap_qk=False,
):
    """One head by hand; ``v_bias``: the Linear whose bias V takes (None: none);
    ``rows``: the padding laid along the queries, (B, T, 1), not the keys;
    ``v_from_h``: V's features from h, not h * d; ``swap_qk``: q made with the
    key projection and k with the query one."""
    d = self_attn.attention_head_size
    sl = slice(head * d, (head + 1) * d)
    q, k = (
        hidden @ m.weight[sl].T + m.bias[sl] for m in (self_attn.query, self_attn.key)
    )
    if swap_qk:
        q, k = k, q
    at = slice(head, head + d) if v_from_h else sl
    v = hidden @ self_attn.value.weight[at].T
    if v_bias is not None:
        v = v + getattr(self_attn, v_bias).bias[at]
    s = q @ k.mT / math.sqrt(d)
    if attention_mask is not None:
        pad = (attention_mask == 0).unsqueeze(-1 if rows else 1)  # (B, T, 1)/(B, 1, T)
        s = s + pad.to(s.dtype) * torch.finfo(s.dtype).min
    p = torch.softmax(s, -1)
    return p, p @ v


def _mha(
    hidden,
    self_attn,
    attention_mask=None,
    *,
    v_bias="value",
    rows=False,
    v_from_h=False,
):
    """Every head by hand, as :func:`_head` (the mask (B, 1, 1, T) or, ``rows``,
    (B, 1, T, 1))."""
    B, T, D = hidden.shape
    H = self_attn.num_attention_heads
    d = D // H
    q, k = (
        m(hidden).view(B, T, H, d).transpose(1, 2)
        for m in (self_attn.query, self_attn.key)
    )
    v = hidden @ self_attn.value.weight.T
    if v_bias is not None:
        v = v + getattr(self_attn, v_bias).bias
    if v_from_h:  # head h's values from features h:h+d
        v = torch.stack([v[..., h : h + d] for h in range(H)], dim=1)  # (B, H, T, d)
    else:
        v = v.view(B, T, H, d).transpose(1, 2)  # (B, H, T, d)
    s = q @ k.mT / math.sqrt(d)
    if attention_mask is not None:
        pad = (attention_mask == 0)[:, None].unsqueeze(-1 if rows else 2)
        s = s.masked_fill(pad, -1e9)
    p = torch.softmax(s, -1)
    return p, (p @ v).transpose(1, 2).reshape(B, T, D)


@pytest.mark.parametrize("v_bias", ["key", "query"])
def test_values_with_another_projections_bias_are_named(v_bias):
    """V made with the value weight and the key's (or query's) bias: named with
    its key and the bias it took, for one head and for all; the controls (the
    right bias) pass."""
    from course.checks import attention

    checks = (
        (attention.head_attention_random, _head),
        (attention.multi_head_attention_random, _mha),
    )
    for check, answer in checks:
        with pytest.raises(CheckFailed) as err:
            check(functools.partial(answer, v_bias=v_bias), seed=5)
        assert f"the values have the {v_bias}'s bias" in str(err.value)
        assert err.value.mistakes == (f"value-bias-of-{v_bias}",)
        check(answer, seed=5)


def test_a_mask_laid_along_the_queries_is_named():
    """The padding laid along the queries, (B, 1, T, 1) for all heads or (B, T, 1)
    for one, added at the dtype's min or filled with -1e9: named with its key."""
    from course.checks import attention

    checks = (
        (attention.head_attention_random, _head),
        (attention.multi_head_attention_random, _mha),
    )
    for check, answer in checks:
        with pytest.raises(CheckFailed) as err:
            check(functools.partial(answer, rows=True), seed=5)
        assert "laid along the queries, (B, 1, T, 1)" in str(err.value)
        assert err.value.mistakes == ("mask-along-queries",)


def test_values_sliced_from_h_are_named():
    """Each head's V from features h:h+d, not h*d:(h+1)*d (the probs right, the
    context wrong): named with its key, for one head and for all; the controls
    pass."""
    from course.checks import attention

    checks = (
        (attention.head_attention_random, _head),
        (attention.multi_head_attention_random, _mha),
    )
    for check, answer in checks:
        with pytest.raises(CheckFailed) as err:
            check(functools.partial(answer, v_from_h=True), seed=5)
        assert "values were taken from V's features h:h+d" in str(err.value)
        assert err.value.mistakes == ("value-start",)
        check(answer, seed=5)


def test_query_and_key_swapped_with_the_mask_along_the_queries_are_both_named():
    """Q made with the key projection and K with the query one: named alone, and
    beside a mask laid along the queries; the controls pass."""
    from course.checks import attention

    check = attention.head_attention_random
    with pytest.raises(CheckFailed, match="made with the key projection") as err:
        check(functools.partial(_head, swap_qk=True), seed=5)
    assert err.value.mistakes == ("query-key-swapped",)
    with pytest.raises(CheckFailed, match="Also: the mask was laid along") as err:
        check(functools.partial(_head, swap_qk=True, rows=True), seed=5)
    assert err.value.mistakes == ("query-key-swapped", "mask-along-queries")
    check(_head, seed=5)
