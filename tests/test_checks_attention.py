"""course.checks.attention: notebook 06's checks (one head, then all heads)."""

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
