"""course.checks.positions: notebook 08's checks (sinusoidal positions, the
permutation check, the causal mask, causal attention), called directly with
answers written here; the oracles are the formulas written out and torch's own
causal attention."""

import math

import pytest
import torch
import torch.nn.functional as F

from course.checks import CheckFailed
from course.checks import positions as check
from course.checks.mistaken import mistaken


def _sinusoidal(max_len, d_model, start=0):
    pe = torch.zeros(max_len, d_model)
    pos = torch.arange(start, start + max_len, dtype=torch.float64)[:, None]
    w = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe[:, 0::2] = torch.sin(pos * w)
    pe[:, 1::2] = torch.cos(pos * w)[:, : d_model // 2]
    return pe


def _causal_mask(T):
    return torch.ones(T, T, dtype=torch.bool).tril()


def _causal_attention(Q, K, V, *, fill=float("-inf"), mask=True):
    T = Q.shape[-2]
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask:
        s = s.masked_fill(~_causal_mask(T), fill)
    p = torch.softmax(s, -1)
    return p, p @ V


def _permutation_check(layer, x, perm):
    return torch.allclose(layer(x[:, perm]), layer(x)[:, perm], atol=1e-5, rtol=1e-4)


def test_sinusoid_oracle_is_the_formula():
    """PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(...), written with
    math.sin and math.cos, odd widths too."""
    for max_len, d in ((7, 6), (5, 5), (3, 1)):
        want = torch.tensor(
            [
                [
                    (math.sin if j % 2 == 0 else math.cos)(
                        p / 10000 ** ((j - j % 2) / d)
                    )
                    for j in range(d)
                ]
                for p in range(max_len)
            ],
            dtype=torch.float64,
        )
        torch.testing.assert_close(check.sinusoid_oracle(max_len, d), want)


def test_sinusoidal_passes_and_names_each_mistake():
    """The formula passes the fixed and random widths (odd ones too); sin and cos
    swapped, concatenated, and positions from 1 are each named."""
    check.sinusoidal_shape(_sinusoidal)
    check.sinusoidal_values(_sinusoidal)
    check.sinusoidal_random(_sinusoidal, seed=1)

    def swapped(max_len, d):
        return _sinusoidal(max_len, d)[:, [j + 1 - 2 * (j % 2) for j in range(d)]]

    def concatenated(max_len, d):
        pe = _sinusoidal(max_len, d)
        return torch.cat([pe[:, 0::2], pe[:, 1::2]], -1)

    wrongs = {
        "sin-cos-swapped": swapped,
        "concatenated": concatenated,
        "pe-from-1": lambda max_len, d: _sinusoidal(max_len, d, start=1),
    }
    for key, wrong in wrongs.items():
        with pytest.raises(CheckFailed) as err:
            check.sinusoidal_values(wrong)
        assert key in err.value.mistakes


def test_sinusoidal_names_the_column_index_in_the_frequency():
    """A frequency from the column index j, or from the pair index i over d, not
    2i over d, is named with its key."""

    def by_column(max_len, d):
        j = torch.arange(d, dtype=torch.float64)
        angle = torch.arange(max_len, dtype=torch.float64)[:, None] * 10000 ** (-j / d)
        return torch.where(j % 2 == 0, angle.sin(), angle.cos())

    def by_pair_index(max_len, d):
        pe = torch.zeros(max_len, d)
        pos = torch.arange(max_len, dtype=torch.float64)[:, None]
        w = 10000.0 ** (-torch.arange(d // 2, dtype=torch.float64) / d)  # i/d
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * w), torch.cos(pos * w)
        return pe

    with pytest.raises(CheckFailed) as err:
        check.sinusoidal_values(by_column)
    assert err.value.mistakes == ("frequency",)
    with pytest.raises(CheckFailed) as err:
        check.sinusoidal_values(by_pair_index)
    assert err.value.mistakes == ("frequency-pair",)


def test_an_odd_width_that_fails_is_named_by_its_width():
    """An answer that fills the cos columns with every frequency crashes on an
    odd width; the verdict says what an odd width needs."""

    def even_only(max_len, d):
        pe = torch.zeros(max_len, d)
        pos = torch.arange(max_len)[:, None]
        w = 10000.0 ** (-torch.arange(0, d, 2) / d)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * w), torch.cos(pos * w)
        return pe

    check.sinusoidal_values(even_only)
    with pytest.raises(CheckFailed, match="fails for an odd d_model"):
        check.sinusoidal_random(even_only, seed=1)


def test_add_positions_sees_order_and_a_bert_layer_does_not():
    """The two layers the permutation checks use: a BERT layer commutes with a
    reordering of its tokens, the same layer after AddPositions does not."""
    layer = check._bert_layer(0)
    x = torch.randn(2, 6, 32, generator=torch.Generator().manual_seed(0)).double()
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    assert _permutation_check(layer, x, perm)
    assert not _permutation_check(check.AddPositions(layer, 32), x, perm)


def test_permutation_check_passes_and_names_mistakes():
    """torch.allclose of layer(x[:, perm]) and layer(x)[:, perm] passes; exact
    equality and an answer that says True always are each caught."""
    check.permutation_check_bert(_permutation_check)
    check.permutation_check_positions(_permutation_check)
    check.permutation_check_random(_permutation_check, seed=2)

    def exact(layer, x, perm):
        return torch.equal(layer(x[:, perm]), layer(x)[:, perm])

    with pytest.raises(CheckFailed, match="compare with a tolerance") as err:
        check.permutation_check_random(exact, seed=2)
    assert err.value.mistakes == ("exact",)
    with pytest.raises(CheckFailed, match="does see token order"):
        check.permutation_check_positions(lambda layer, x, perm: True)


def test_permutation_check_says_a_tolerance_too_loose():
    """A tolerance (atol=10) that says True for the positions layer yet False for
    outputs 100 apart is named too loose; one that can never say False there
    (atol=1000) gets the plain verdict."""

    def within(atol):
        def fn(layer, x, perm):
            return torch.allclose(layer(x[:, perm]), layer(x)[:, perm], atol=atol)

        return fn

    check.permutation_check_bert(within(10.0))
    with pytest.raises(CheckFailed, match="tolerance is too loose"):
        check.permutation_check_positions(within(10.0))
    with pytest.raises(CheckFailed, match="does see token order") as err:
        check.permutation_check_positions(within(1e3))
    assert "too loose" not in str(err.value)


def test_permutation_check_names_a_tolerance_too_tight_for_float32():
    """torch.allclose's defaults say True in float64 and False on the float32
    case: named too tight; the notebook's tolerance passes that case."""

    def defaults(layer, x, perm):
        return torch.allclose(layer(x[:, perm]), layer(x)[:, perm])

    for seed in (0, 5):
        layer, x, perm = check._float32_case(seed)
        assert x.dtype == torch.float32
        assert _permutation_check(layer, x, perm)
        assert not defaults(layer, x, perm)
    check.permutation_check_bert(defaults)
    check.permutation_check_positions(defaults)
    check.permutation_check_random(_permutation_check, seed=5)
    with pytest.raises(CheckFailed, match="compared too tightly") as err:
        check.permutation_check_random(defaults, seed=5)
    assert err.value.mistakes == ("tolerance-too-tight",)


def test_causal_mask_passes_and_names_each_mistake():
    """The lower triangle passes at every length; upper, strict and inverted
    triangles are each named."""
    check.causal_mask_small(_causal_mask)
    check.causal_mask_random(_causal_mask, seed=5)
    wrongs = {
        "causal-upper-lower": lambda T: _causal_mask(T).T,
        "no-diagonal": lambda T: _causal_mask(T).tril(-1),
        "causal-inverted": lambda T: ~_causal_mask(T),
    }
    for key, wrong in wrongs.items():
        with pytest.raises(CheckFailed) as err:
            check.causal_mask_small(wrong)
        assert err.value.mistakes == (key,)
    with pytest.raises(CheckFailed, match="bool tensor"):
        check.causal_mask_small(lambda T: _causal_mask(T).float())


def test_causal_mask_names_a_float_mask_with_leading_dims_both():
    """minGPT's buffer, floats of shape (1, 1, T, T): the dtype, then the shape;
    a bool (1, 1, T, T) mask, the shape alone; a float (T, T) one, the dtype
    alone; a bool mask of another shape, the shape."""
    with pytest.raises(CheckFailed, match="bool tensor") as err:
        check.causal_mask_random(lambda T: _causal_mask(T).float()[None, None], 3)
    assert "Also: causal_mask(1) has shape (1, 1, 1, 1)" in str(err.value)
    assert err.value.mistakes == ("causal-mask-dims",)
    with pytest.raises(CheckFailed, match="leading dims of size 1") as err:
        check.causal_mask_small(lambda T: _causal_mask(T)[None, None])
    assert "bool" not in str(err.value)
    with pytest.raises(CheckFailed) as err:
        check.causal_mask_small(lambda T: _causal_mask(T).float())
    assert "leading dims" not in str(err.value)
    with pytest.raises(CheckFailed, match=r"should have shape \(4, 4\)"):
        check.causal_mask_small(lambda T: _causal_mask(T + 1))


def test_causal_attention_passes_and_names_each_mistake():
    """Masked scores then softmax pass, batched or not; a missing mask, a fill of
    0 and a mask after the softmax are each named, in probs and in context."""
    check.causal_attention_probs(_causal_attention)
    check.causal_attention_context(_causal_attention)
    check.causal_attention_random(_causal_attention, seed=3)

    def after(Q, K, V):
        p, _ = _causal_attention(Q, K, V, mask=False)
        p = p * _causal_mask(Q.shape[-2])
        return p, p @ V

    wrongs = {
        "causal-missing": lambda Q, K, V: _causal_attention(Q, K, V, mask=False),
        "fill-zero": lambda Q, K, V: _causal_attention(Q, K, V, fill=0.0),
        "after-softmax": after,
    }
    for key, wrong in wrongs.items():
        for part in (check.causal_attention_probs, check.causal_attention_context):
            with pytest.raises(CheckFailed) as err:
                part(wrong)
            assert key in err.value.mistakes


def test_causal_attention_by_torch_is_the_shortcut():
    """torch's fused attention is turned off while the answer runs."""

    def fused(Q, K, V):
        out = torch.nn.functional.scaled_dot_product_attention(Q, K, V, is_causal=True)
        return None, out

    with pytest.raises(CheckFailed, match="Build the causal attention yourself"):
        check.causal_attention_context(fused)


def test_causal_steps_done_right_are_torch_s_causal_attention():
    """The steps a causal_attention verdict is made of, each done right, give
    torch's causal attention; with the mask after the softmax and a scale by d
    (two mistakes at once), the plain formula of both."""
    Q, K, V = (torch.randn(2, 5, 4, dtype=torch.float64) for _ in range(3))
    steps = [*check._causal_steps(5, 4), check._WEIGH]
    state = {"q": Q, "k": K, "v": V, "keep": check._tril(5)}
    for step in steps:
        state = step.right(state)
    torch.testing.assert_close(
        state["c"], F.scaled_dot_product_attention(Q, K, V, is_causal=True)
    )
    tiers = mistaken(
        {"q": Q, "k": K, "v": V, "keep": check._tril(5)},
        steps,
        result=lambda st: st["c"],
    )
    pair = next(
        values
        for verdict, values in tiers[1].items()
        if set(verdict.mistakes) == {"by-d", "after-softmax"}
    )
    tril = torch.ones(5, 5).tril().double()
    want = torch.softmax(Q @ K.mT / 4, -1) * tril @ V
    assert any(torch.allclose(v, want) for v in pair)
