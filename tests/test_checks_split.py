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


def test_split_heads_names_t_and_d_swapped_and_judges_the_rest():
    """A split laid out (B, H, d, T) is named by its shape, and its values with T
    and d swapped back name a second mistake: a (d, H) split, or a view without
    transpose; with nothing else wrong, the layout alone."""

    def d_t(x, H):
        return _split(x, H).permute(0, 1, 3, 2)

    def d_h_then_transpose13(x, H):
        B, T, D = x.shape
        return x.reshape(B, T, D // H, H).transpose(1, 3)

    def view_then_swap(x, H):
        B, T, D = x.shape
        return x.reshape(B, H, T, D // H).mT

    cases = {
        d_t: ("heads-d-t",),
        d_h_then_transpose13: ("heads-d-t", "d-h"),
        view_then_swap: ("heads-d-t", "split-no-transpose"),
    }
    for wrong, keys in cases.items():
        with pytest.raises(CheckFailed, match=r"laid out \(B, H, d, T\)") as err:
            check.split_heads_random(wrong, seed=2)
        assert err.value.mistakes == keys, wrong.__name__
    with pytest.raises(CheckFailed, match="laid out") as err:
        check.split_heads_shape(d_h_then_transpose13)
    assert err.value.mistakes == ("heads-d-t",)
    with pytest.raises(CheckFailed, match="laid out") as err:
        check.split_heads_bertviz(d_h_then_transpose13)
    assert err.value.mistakes == ("heads-d-t", "d-h")
    with pytest.raises(CheckFailed, match="still does not match") as err:
        check.split_heads_random(lambda x, H: d_t(x, H) + 1, seed=2)
    assert err.value.mistakes == ("heads-d-t",)


def test_where_t_equals_d_the_values_tell_t_and_d_swapped():
    """Where T == d, (B, H, d, T) is the right shape: the right split passes (the
    control) and the swapped ones are named by their values."""
    x = torch.randn(2, 4, 12, generator=torch.Generator().manual_seed(1))  # d = 4
    check._expect_split(_split, x, 3)

    def d_h_then_transpose13(x, H):
        B, T, D = x.shape
        return x.reshape(B, T, D // H, H).transpose(1, 3)

    with pytest.raises(CheckFailed, match="laid out") as err:
        check._expect_split(lambda x, H: _split(x, H).mT, x, 3)
    assert err.value.mistakes == ("heads-d-t",)
    with pytest.raises(CheckFailed, match="laid out") as err:
        check._expect_split(d_h_then_transpose13, x, 3)
    assert err.value.mistakes == ("heads-d-t", "d-h")


def test_split_heads_names_batch_and_heads_merged_and_judges_the_rest():
    """A split laid out (B*H, T, d) (d2l's transpose_qkv) is named by its shape,
    and its values laid out (B, H, T, d) again name a second mistake: a view
    without transpose, or a (d, H) split; with nothing else wrong, the layout
    alone. The right split passes (the control)."""

    def merged(x, H):
        B, T, D = x.shape
        return _split(x, H).reshape(B * H, T, D // H)

    def merged_no_transpose(x, H):
        B, T, D = x.shape
        return x.reshape(B * H, T, D // H)

    def merged_d_h(x, H):
        B, T, D = x.shape
        return x.reshape(B, T, D // H, H).permute(0, 3, 1, 2).reshape(B * H, T, -1)

    check.split_heads_random(_split, seed=2)
    cases = {
        merged: ("batch-heads-merged",),
        merged_no_transpose: ("batch-heads-merged", "split-no-transpose"),
        merged_d_h: ("batch-heads-merged", "d-h"),
    }
    for wrong, keys in cases.items():
        for seed in range(5):
            with pytest.raises(CheckFailed, match=r"merged into one dim") as err:
                check.split_heads_random(wrong, seed=seed)
            assert err.value.mistakes == keys, (wrong.__name__, seed)
    with pytest.raises(CheckFailed, match="transpose_qkv") as err:
        check.split_heads_shape(merged)
    assert err.value.mistakes == ("batch-heads-merged",)
    with pytest.raises(CheckFailed, match="transpose_qkv") as err:
        check.split_heads_bertviz(merged_d_h)
    assert err.value.mistakes == ("batch-heads-merged", "d-h")
    with pytest.raises(CheckFailed, match="apart again") as err:
        check.split_heads_random(lambda x, H: merged(x, H) + 1, seed=2)
    assert err.value.mistakes == ("batch-heads-merged",)


@pytest.mark.parametrize("seed", range(4))
def test_a_loop_one_short_is_named_alone_and_beside_a_d_h_layout(seed):
    """A zeroed output whose last (or first) head or token is never written is
    named, and beside merge's (d, H) layout both are; the full loops pass."""

    def split_short(x, H, heads=None):
        B, T, D = x.shape
        d = D // H
        out = x.new_zeros(B, H, T, d)
        for h in heads or range(H - 1):
            out[:, h] = x[:, :, h * d : (h + 1) * d]
        return out

    def merge_short(x, stride=False, tokens=None):
        B, H, T, d = x.shape
        out = x.new_zeros(B, T, H * d)
        for t in tokens or range(T - 1):
            for h in range(H):
                where = slice(h, None, H) if stride else slice(h * d, (h + 1) * d)
                out[:, t, where] = x[:, h, t]
        return out

    check.split_heads_random(lambda x, H: split_short(x, H, range(H)), seed)
    check.merge_heads_random(lambda x: merge_short(x, tokens=range(x.shape[2])), seed)
    for wrong, check_fn, keys in (
        (split_short, check.split_heads_random, ("left-zero",)),
        (
            lambda x, H: split_short(x, H, range(1, H)),
            check.split_heads_random,
            ("left-zero",),
        ),
        (merge_short, check.merge_heads_random, ("left-zero",)),
        (
            lambda x: merge_short(x, stride=True),
            check.merge_heads_random,
            ("merge-d-h", "left-zero"),
        ),
    ):
        with pytest.raises(CheckFailed) as err:
            check_fn(wrong, seed)
        assert err.value.mistakes == keys, str(err.value)
