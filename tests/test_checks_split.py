"""course.checks.split: notebook 04's checks (heads split off the last dim and
merged back), called directly with answers written here."""

import pytest
import torch

from course.checks import CheckFailed
from course.checks import split as check


def _split(x, H):
    B, T, D = x.shape
    return x.view(B, T, H, D // H).transpose(1, 2)


def _merge(x):
    B, H, T, d = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d)


def test_by_blocks_is_view_then_transpose():
    """Each head's feature block, stacked, is view(B, T, H, d).transpose(1, 2)."""
    x = torch.randn(2, 5, 12, generator=torch.Generator().manual_seed(0))
    for H in (1, 2, 3, 4, 6):
        assert torch.equal(check._by_blocks(x, H), _split(x, H))
    assert not torch.equal(check._by_blocks(x, 3), x.reshape(2, 3, 5, 4))


def test_random_shapes_keep_t_h_and_d_apart():
    """Every drawn case has T, H and d all different (where they agree, mistakes
    look alike), and the same seed draws the same cases."""
    for seed in range(40):
        cases = [case[1:] for case in check._random_shapes(seed)]
        assert cases == [case[1:] for case in check._random_shapes(seed)]
        for B, T, H, d in cases:
            assert len({T, H, d}) == 3 and 1 <= B <= 3


def test_split_heads_passes_and_names_each_mistake():
    """The right split passes; a view without transpose and a (d, H) split are
    named with their keys."""
    check.split_heads_random(_split, seed=2)

    def no_transpose(x, H):
        B, T, D = x.shape
        return x.reshape(B, H, T, D // H)

    def d_h(x, H):
        B, T, D = x.shape
        return x.reshape(B, T, D // H, H).permute(0, 3, 1, 2)

    for wrong, key in ((no_transpose, "split-no-transpose"), (d_h, "d-h")):
        with pytest.raises(CheckFailed) as err:
            check.split_heads_random(wrong, seed=2)
        assert key in err.value.mistakes


def test_split_heads_names_shapes_left_unswapped():
    """(B, T, H, d) and (B, T, d, H) are named by their shape alone."""

    def no_swap(x, H):
        B, T, D = x.shape
        return x.view(B, T, H, D // H)

    def last_two(x, H):
        return no_swap(x, H).transpose(-2, -1)

    with pytest.raises(CheckFailed, match="move the head dim") as err:
        check.split_heads_random(no_swap, seed=2)
    assert err.value.mistakes == ("no-swap",)
    with pytest.raises(CheckFailed, match="not the last two dims") as err:
        check.split_heads_random(last_two, seed=2)
    assert err.value.mistakes == ("last-two-swapped",)


def test_a_shape_where_t_equals_h_is_not_named_a_mistake():
    """Where T == H, a (B, T, H, d) result is also (B, H, T, d): no mistake is
    named by the shape (control of the T != H guard)."""
    check._expect_split_shape(torch.zeros(1, 3, 3, 4), B=1, T=3, H=3, d=4)
    with pytest.raises(CheckFailed, match="should have shape"):
        check._expect_split_shape(torch.zeros(1, 3, 4), B=1, T=3, H=3, d=4)


def test_merge_heads_passes_and_names_each_mistake():
    """The right merge passes; a reshape without transpose, a (d, H) layout and
    the input's own shape are each named."""
    check.merge_heads_random(_merge, seed=3)

    def no_transpose(x):
        B, H, T, d = x.shape
        return x.reshape(B, T, H * d)

    def d_h(x):
        B, H, T, d = x.shape
        return x.permute(0, 2, 3, 1).reshape(B, T, H * d)

    for wrong, key in ((no_transpose, "merge-no-transpose"), (d_h, "merge-d-h")):
        with pytest.raises(CheckFailed) as err:
            check.merge_heads_random(wrong, seed=3)
        assert key in err.value.mistakes
    with pytest.raises(CheckFailed, match="returned its input's shape"):
        check.merge_heads_random(lambda x: x.clone(), seed=3)


def test_split_and_merge_against_bertviz():
    """On the course model's queries the right split equals bertviz's neuron-view
    queries and the right merge gives back the query layer's output; a split
    without transpose is named."""
    check.split_heads_shape(_split)
    check.split_heads_bertviz(_split)
    check.merge_heads_shape(_merge)
    check.merge_heads_values(_merge)

    def no_transpose(x, H):
        B, T, D = x.shape
        return x.reshape(B, H, T, D // H)

    with pytest.raises(CheckFailed) as err:
        check.split_heads_bertviz(no_transpose)
    assert err.value.mistakes == ("split-no-transpose",)
