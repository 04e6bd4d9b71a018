"""course.checks.modern: notebook 12's checks (rotary positions, sliding windows,
shared K/V heads, a ModernBERT layer's attention, the cache's bytes), called
directly with answers written here; the oracles are the formulas written out and
the models' own outputs."""

import math

import pytest
import torch

from course import models
from course.checks import CheckFailed
from course.checks import modern as check


def _rotary(x, positions, base, *, sign=1.0, halves=True):
    d = x.shape[-1]
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = positions.double()[:, None] * inv  # (T, d / 2)
    if not halves:  # pairs (2i, 2i + 1), as complex numbers
        pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2))
        turned = pairs * torch.polar(torch.ones_like(angle), sign * angle)
        return torch.view_as_real(turned).flatten(-2).to(x.dtype)
    cos = torch.cat([angle.cos()] * 2, -1)
    sin = torch.cat([angle.sin()] * 2, -1)
    x1, x2 = x.double()[..., : d // 2], x.double()[..., d // 2 :]
    return (x.double() * cos + sign * torch.cat([-x2, x1], -1) * sin).to(x.dtype)


def _window(T, window, *, reach=None, one_sided=False):
    i = torch.arange(T)
    offset = i[:, None] - i[None, :]
    reach = window // 2 if reach is None else reach
    if one_sided:
        return (offset >= 0) & (offset <= reach)
    return offset.abs() <= reach


def _attend(Q, K, V, mask=None, *, scale=True, add_mask=False):
    s = Q @ K.transpose(-2, -1) / (math.sqrt(Q.shape[-1]) if scale else 1.0)
    if mask is not None:
        s = s + mask if add_mask else s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ V


def _gqa(Q, K, V, mask, *, tiled=False, **kwargs):
    g = Q.shape[1] // K.shape[1]
    if tiled:
        K, V = K.repeat(1, g, 1, 1), V.repeat(1, g, 1, 1)
    else:
        K, V = K.repeat_interleave(g, dim=1), V.repeat_interleave(g, dim=1)
    return _attend(Q, K, V, mask, **kwargs)


def _modern(attn, hidden, *, windowed=None, rotate_v=False, rotate_k=True):
    config, (B, T, D) = attn.config, hidden.shape
    kind = config.layer_types[attn.layer_idx]
    theta = config.rope_parameters[kind]["rope_theta"]
    H, d = config.num_attention_heads, attn.head_dim
    q, k, v = attn.Wqkv(hidden).view(B, T, 3, H, d).permute(2, 0, 3, 1, 4)
    positions = torch.arange(T)
    q = _rotary(q, positions, theta)
    k = _rotary(k, positions, theta) if rotate_k else k
    v = _rotary(v, positions, theta) if rotate_v else v
    windowed = kind == "sliding_attention" if windowed is None else windowed
    mask = _window(T, config.local_attention) if windowed else None
    context = _attend(q, k, v, mask)
    return attn.Wo(context.transpose(1, 2).reshape(B, T, D))


def _cache_bytes(layers, kv_heads, d, T, batch, size):
    return 2 * layers * kv_heads * d * T * batch * size


def test_rotated_is_the_rotate_half_formula_and_its_inverse():
    """transformers' rotation equals x cos + rotate_half(x) sin written out, for
    any positions and base; its sign -1 turns it back."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 8, generator=gen, dtype=torch.float64)
    positions = torch.tensor([3, 0, 7, 1, 12])
    for base in (100.0, 10000.0, 160000.0):
        turned = check._rotated(x, positions, base)
        # the library's cos and sin are float32: equal to 1e-6
        close = {"atol": 1e-6, "rtol": 1e-6}
        torch.testing.assert_close(turned, _rotary(x, positions, base), **close)
        back = check._rotated(turned, positions, base, -1)
        torch.testing.assert_close(back, x, **close)
        assert not torch.allclose(turned, x)


def test_interleaved_and_other_frequencies_are_the_mistakes_written_out():
    """The interleaved layout turns pairs (2i, 2i + 1) as complex numbers; the
    frequencies with i/d differ from the right ones."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3, 6, 8, generator=gen, dtype=torch.float64)
    positions = torch.arange(2, 8)
    torch.testing.assert_close(
        check._interleaved(x, positions, 500.0),
        _rotary(x, positions, 500.0, halves=False),
    )
    for wrong in check._other_frequencies(x, positions, 500.0):
        assert not torch.allclose(wrong, _rotary(x, positions, 500.0))


def test_rotary_passes_and_names_each_mistake():
    """The rotate-half rotation passes; the interleaved layout, the wrong way
    round, base 10000 always and positions 0, 1, 2, ... are each named."""
    check.rotary_shape(_rotary)
    check.rotary_modernbert(_rotary)
    check.rotary_random(_rotary, seed=1)
    wrongs = {
        "interleaved": lambda x, p, b: _rotary(x, p, b, halves=False),
        "backwards": lambda x, p, b: _rotary(x, p, b, sign=-1.0),
        "fixed-base": lambda x, p, b: _rotary(x, p, 10000.0),
        "positions": lambda x, p, b: _rotary(x, torch.arange(x.shape[-2]), b),
    }
    for key, wrong in wrongs.items():
        with pytest.raises(CheckFailed) as err:
            check.rotary_random(wrong, seed=1)
        assert key in err.value.mistakes


def _partial_rotary(x, positions, base, *, share=2, own=True, halves=True):
    """Only the first d / ``share`` features turned, the rest passed through; the
    part's frequencies its own (base^(-2i/r): GPT-NeoX) or the head's first
    (base^(-2i/d), ChatGLM2's)."""
    d = x.shape[-1]
    r = d // share
    part_base = base if own else base ** (r / d)
    turned = _rotary(x[..., :r], positions, part_base, halves=halves)
    return torch.cat([turned, x[..., r:]], -1)


@pytest.mark.parametrize("own", [True, False])
@pytest.mark.parametrize("share", [2, 4])
def test_a_partial_rotary_is_named_alone_and_with_neighbouring_pairs(share, own):
    """A partial rotary (half or a quarter of the features, either frequency
    table) is named, alone and beside the interleaved layout (ChatGLM2's)."""
    for halves, keys in ((True, ("partial-rotary",)), (False, None)):
        keys = keys or ("partial-rotary", "interleaved")

        def wrong(x, p, b, halves=halves):
            return _partial_rotary(x, p, b, share=share, own=own, halves=halves)

        with pytest.raises(CheckFailed) as err:
            check.rotary_modernbert(wrong)
        assert err.value.mistakes == keys, str(err.value)


@pytest.mark.parametrize("d", [6, 10, 12])
def test_a_partial_rotary_of_an_odd_half_is_named(d):
    """Where half the features is odd (d = 6, 10), a partial rotary turns the
    half rounded down to pairs (GPT-NeoX's rotary_pct: d // 2 // 2 * 2): named;
    d = 12 (half 6, even) is the control."""
    gen = torch.Generator().manual_seed(d)
    x, positions = torch.randn(2, 5, d, generator=gen), torch.arange(3, 8)
    r = d // 2 // 2 * 2

    def wrong(x, p, b):
        return torch.cat([_rotary(x[..., :r], p, b), x[..., r:]], -1)

    with pytest.raises(CheckFailed) as err:
        check._expect_rotary(wrong, x, positions, 500.0)
    assert err.value.mistakes == ("partial-rotary",), str(err.value)


def _angles_in_place(x, positions, base):
    """rotate_half's pairs (i, i + d/2), with the angles repeated in place (t0, t0,
    t1, t1, ...) as the interleaved layout lays them out."""
    d = x.shape[-1]
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = (positions.double()[:, None] * inv).repeat_interleave(2, -1)
    x1, x2 = x.double()[..., : d // 2], x.double()[..., d // 2 :]
    return (x.double() * angle.cos() + torch.cat([-x2, x1], -1) * angle.sin()).to(
        x.dtype
    )


@pytest.mark.parametrize("seed", range(6))
def test_angles_in_place_for_half_pairs_are_named(seed):
    """Angles laid out (t0, t0, t1, t1, ...) while the pairs are rotate_half's:
    named, on ModernBERT's sizes and random ones; the right layout (the angles
    twice, end to end) passes."""
    check.rotary_random(_rotary, seed=seed)
    for run in (check.rotary_modernbert, lambda f: check.rotary_random(f, seed)):
        with pytest.raises(CheckFailed) as err:
            run(_angles_in_place)
        assert err.value.mistakes == ("angles-interleaved",), str(err.value)


def test_rotary_by_transformers_is_the_shortcut():
    """transformers' rotate_half is turned off while the answer runs."""
    from transformers.models.modernbert import modeling_modernbert as mb

    def library(x, positions, base):
        d = x.shape[-1]
        angle = positions[:, None] * base ** (-torch.arange(0, d, 2) / d)
        cos, sin = torch.cat([angle.cos()] * 2, -1), torch.cat([angle.sin()] * 2, -1)
        return x * cos + mb.rotate_half(x) * sin

    with pytest.raises(CheckFailed, match="Rotate by hand"):
        check.rotary_modernbert(library)


def test_modernbert_window_is_half_the_window_each_side():
    """Where ModernBERT's sliding-window layer lets a query look: keys at most
    window // 2 away, on both sides; each mistake's mask is another."""
    for T, window in ((9, 4), (7, 3), (5, 30)):
        assert torch.equal(check._modernbert_window(T, window), _window(T, window))
    right = _window(12, 4)
    for tier in check._window_mistakes(12, 4):
        for wrongs in tier.values():
            assert all(not torch.equal(w, right) for w in wrongs)


@pytest.mark.parametrize("seed", range(3))
def test_a_causal_window_of_the_wrong_width_names_both_mistakes(seed):
    """A causal window that is also a whole window wide (Mistral's 0 <= i - j <
    window, or <= window) or off by one names both mistakes; a causal window of
    the right width names one."""
    check.sliding_window_mask_random(_window, seed=seed)
    reaches = [  # (the keys named, how far back the window reaches)
        (("one-sided",), lambda w: w // 2),
        (("one-sided", "whole-window"), lambda w: w - 1),  # Mistral's
        (("one-sided", "whole-window"), lambda w: w),
        (("one-sided", "window-off-by-one"), lambda w: w // 2 + 1),
    ]
    for keys, reach in reaches:

        def wrong(T, w, reach=reach):
            return _window(T, w, reach=reach(w), one_sided=True)

        with pytest.raises(CheckFailed) as err:
            check.sliding_window_mask_modernbert(wrong)
        # (a window of 4 reaches 3 back both off by one and a whole window wide)
        assert set(keys) <= set(err.value.mistakes), str(err.value)
        with pytest.raises(CheckFailed) as err:
            check.sliding_window_mask_random(wrong, seed)
        assert set(keys) <= set(err.value.mistakes), str(err.value)


def test_sliding_window_mask_passes_and_names_each_mistake():
    """|i - j| <= window // 2 passes; off by one, a whole window each side, a
    causal window and the inverse are each named."""
    check.sliding_window_mask_shape(_window)
    check.sliding_window_mask_modernbert(_window)
    check.sliding_window_mask_random(_window, seed=2)
    wrongs = {
        "window-off-by-one": lambda T, w: _window(T, w, reach=w // 2 - 1),
        "whole-window": lambda T, w: _window(T, w, reach=w),
        "one-sided": lambda T, w: _window(T, w, one_sided=True),
        "window-inverted": lambda T, w: ~_window(T, w),
    }
    for key, wrong in wrongs.items():
        with pytest.raises(CheckFailed) as err:
            check.sliding_window_mask_modernbert(wrong)
        assert err.value.mistakes == (key,)


def test_grouped_query_attention_passes_and_names_each_mistake():
    """K/V heads repeated in place pass (random shapes and a Llama layer); tiled
    heads, no scale, an ignored mask and a bool mask added are each named."""
    check.grouped_query_attention_shape(_gqa)
    check.grouped_query_attention_llama(_gqa)
    check.grouped_query_attention_random(_gqa, seed=3)
    gen = torch.Generator().manual_seed(3)
    Q = torch.randn(2, 6, 5, 8, generator=gen)
    K, V = (torch.randn(2, 2, 5, 8, generator=gen) for _ in range(2))
    mask = torch.rand(5, 5, generator=gen) < 0.5
    mask[:, 0] = True
    check._expect_gqa(_gqa, Q, K, V, mask)
    wrongs = {
        "tiled": lambda *a: _gqa(*a, tiled=True),
        "no-scale": lambda *a: _gqa(*a, scale=False),
        "mask-ignored": lambda Q, K, V, m: _gqa(Q, K, V, None),
        "bool-mask-added": lambda *a: _gqa(*a, add_mask=True),
    }
    for key, wrong in wrongs.items():
        with pytest.raises(CheckFailed) as err:
            check._expect_gqa(wrong, Q, K, V, mask)
        assert err.value.mistakes == (key,)


def _expanded_view(Q, K, V, mask=None):
    """K/V heads repeated by an expand, then merged with .view: raises where 1 <
    H_kv < H (an expand's repeats share memory), runs where H_kv is 1 or H."""
    B, H, T, d = Q.shape
    H_kv = K.shape[1]
    K, V = (t[:, :, None].expand(B, H_kv, H // H_kv, T, d) for t in (K, V))
    return _attend(Q, K.view(B, H, T, d), V.view(B, H, T, d), mask)


@pytest.mark.parametrize("seed", range(4))
def test_a_view_that_cannot_merge_repeated_heads_is_not_blamed_on_the_heads(seed):
    """The expand-then-view raise: the heads were repeated, so the verdict does
    not say they were not; the raise and its hint (reshape, or .contiguous()
    first) are said. Control: K/V used unrepeated is still named."""
    with pytest.raises(CheckFailed) as err:
        check.grouped_query_attention_random(_expanded_view, seed=seed)
    assert "kv-not-repeated" not in err.value.mistakes
    assert "must first have one head" not in str(err.value)
    assert "raised RuntimeError: view size is not compatible" in str(err.value)
    assert ".reshape" in str(err.value).split("Hint:")[1]
    with pytest.raises(CheckFailed) as err:
        check.grouped_query_attention_random(_attend, seed=seed)
    assert "kv-not-repeated" in err.value.mistakes


@pytest.mark.parametrize("seed", [245147, *range(40)])
def test_an_ignored_mask_fails_every_draw(seed):
    """Every random case's mask hides a key from some query, so an answer that
    ignores the mask fails on every seed (245147 drew masks of all True before)."""
    with pytest.raises(CheckFailed) as err:
        check.grouped_query_attention_random(
            lambda Q, K, V, mask=None: _gqa(Q, K, V, None), seed=seed
        )
    assert "mask-ignored" in err.value.mistakes


def _grouped_5d(Q, K, V, mask=None):
    """Query heads grouped as (B, H_kv, g, T, d) against K/V heads unrepeated: right
    with a (T, T) mask, wrong with a batched one (raises, or where B == H_kv, pairs
    each example's mask with a group of heads)."""
    B, H, T, d = Q.shape
    H_kv = K.shape[1]
    s = Q.view(B, H_kv, H // H_kv, T, d) @ K[:, :, None].transpose(-2, -1) / d**0.5
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return (s.softmax(-1) @ V[:, :, None]).reshape(B, H, T, d)


@pytest.mark.parametrize("seed", range(12))
def test_a_mask_that_meets_grouped_scores_is_named_raised_or_not(seed):
    """Scores grouped in 5-D: a batched mask raises (B != H_kv) or mixes the
    examples (B == H_kv); either way the mask is named, not K/V repetition, and
    the first random case always has such a mask."""
    with pytest.raises(CheckFailed) as err:
        check.grouped_query_attention_random(_grouped_5d, seed=seed)
    assert err.value.mistakes[0] in ("gqa-mask-shape", "gqa-mask-by-group")
    assert "kv-not-repeated" not in err.value.mistakes


def test_layer_variant_unchanged_is_the_module_own_output():
    """The layer a mistake's numbers are made from gives, unchanged, what each
    attention module of a random ModernBERT returned in the model."""
    model = models.modern_bert(seed=5, num_heads=2, head_size=8, local_attention=4)
    ids = torch.randint(1, 100, (1, 9), generator=torch.Generator().manual_seed(0))
    seen = check.attention_io(model, ids)
    assert len(seen) == model.config.num_hidden_layers
    for attn, hidden, out in seen:
        torch.testing.assert_close(check._layer_variant(attn, hidden), out)
        with torch.no_grad():
            torch.testing.assert_close(_modern(attn, hidden), out)


def test_modernbert_attention_passes_and_names_each_mistake():
    """The layer by hand passes, global and local; no window on a local layer,
    rotated values and unrotated keys are each named; calling the module is the
    shortcut."""
    check.modernbert_attention_global(_modern)
    check.modernbert_attention_local(_modern)
    check.modernbert_attention_random(_modern, seed=4)
    wrongs = {
        "no-window": lambda attn, h: _modern(attn, h, windowed=False),
        "rope-on-v": lambda attn, h: _modern(attn, h, rotate_v=True),
        "k-not-rotated": lambda attn, h: _modern(attn, h, rotate_k=False),
    }
    for key, wrong in wrongs.items():
        with pytest.raises(CheckFailed) as err:
            check.modernbert_attention_local(wrong)
        assert key in err.value.mistakes
    with pytest.raises(CheckFailed, match="calling the attention module"):
        check.modernbert_attention_global(lambda attn, h: attn(h)[0])


@pytest.mark.parametrize("seed", range(4))
def test_a_mistake_of_every_layer_is_named_once(seed):
    """Values rotated on every layer and the window on every layer: the global
    layer's verdict names the window, and the rotation named on a local layer
    first is not said again."""
    with pytest.raises(CheckFailed) as err:
        check.modernbert_attention_random(
            lambda attn, h: _modern(attn, h, windowed=True, rotate_v=True), seed=seed
        )
    assert str(err.value).count("values are rotated too") == 1, str(err.value)
    assert "the window is applied on a global layer" in str(err.value)


def test_measured_cache_is_two_tensors_per_layer():
    """A Llama's cache holds K and V of (batch, H_kv, T, d) per layer: what the
    formula counts, in float32 and bfloat16."""
    for args, size in (
        ((2, 2, 8, 9, 3, "float32"), 4),
        ((1, 3, 4, 5, 2, "bfloat16"), 2),
    ):
        assert check._measured_cache(*args) == _cache_bytes(*args[:5], size)


def test_kv_cache_bytes_passes_and_names_each_mistake():
    """The formula passes; K only, values not bytes, and one sequence for the
    batch are each named; a float is no int."""
    check.kv_cache_bytes_llama(_cache_bytes)
    check.kv_cache_bytes_random(_cache_bytes, seed=5)
    wrongs = {
        "only-k": lambda *a: _cache_bytes(*a) // 2,
        "values": lambda *a: _cache_bytes(*a[:5], 1),
        "batch": lambda L, H, d, T, B, size: _cache_bytes(L, H, d, T, 1, size),
    }
    for key, wrong in wrongs.items():
        with pytest.raises(CheckFailed) as err:
            check.kv_cache_bytes_llama(wrong)
        assert err.value.mistakes == (key,)
    with pytest.raises(CheckFailed, match="should be an int"):
        check.kv_cache_bytes_llama(lambda *a: float(_cache_bytes(*a)))


def _leaving_out(*factors):
    """kv_cache_bytes without ``factors``: "2" (K and V), "size", "batch",
    "layers"."""

    def count(layers, kv_heads, d, T, batch, size):
        kept = {"2": 2, "size": size, "batch": batch, "layers": layers}
        for f in factors:
            kept[f] = 1
        return math.prod(kept.values()) * kv_heads * d * T

    return count


KEYS = {"2": "only-k", "size": "values", "batch": "batch", "layers": "one-layer"}


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize(
    "factors",
    [
        ("layers",),
        ("2", "batch"),
        ("size", "batch"),
        ("2", "size"),
        ("batch", "layers"),
    ],
)
def test_kv_cache_bytes_names_the_fewest_mistakes_over_all_cases(seed, factors):
    """One or two factors left out are named, each, on the Llama cases and on
    every seed's random cases, even where on one case another mistake gives the
    same count (2 * batch == bytes_per_value: "values, not bytes" on
    kv_cache_bytes(2, 1, 8, 12, 2, 4)); the random cases tell every set of
    mistakes apart. Control: the formula passes."""
    check.kv_cache_bytes_random(_cache_bytes, seed=seed)
    for run in (
        check.kv_cache_bytes_llama,
        lambda f: check.kv_cache_bytes_random(f, seed),
    ):
        with pytest.raises(CheckFailed) as err:
            run(_leaving_out(*factors))
        assert set(err.value.mistakes) == {KEYS[f] for f in factors}, str(err.value)
    case = (2, 1, 8, 12, 2, "float32")
    assert _leaving_out("2", "batch")(*case[:5], 4) == _leaving_out("size")(
        *case[:5], 4
    )
    with pytest.raises(CheckFailed) as err:
        check._expect_cache_cases(
            _leaving_out("2", "batch"), [case, (3, 2, 4, 5, 4, "bfloat16")]
        )
    assert err.value.mistakes == ("only-k", "batch")
    assert check._told_apart([case, (3, 2, 4, 5, 4, "bfloat16")])


def test_cases_that_do_not_tell_mistakes_apart_are_seen():
    """bytes_per_value 2 and a batch of 2 in every case: left out, either gives
    the same counts, so such cases are not told apart."""
    assert check._told_apart([(2, 2, 8, 9, 3, "float32"), (3, 1, 16, 5, 2, "bfloat16")])
    assert not check._told_apart(
        [(2, 1, 8, 12, 2, "bfloat16"), (3, 2, 4, 5, 2, "bfloat16")]
    )
