"""course.checks.decoding: notebook 13's checks (cross-attention, a KV cache,
greedy decoding, sampling), called directly with answers written here; the oracles
are attention written out, the models' own modules and outputs, and torch's
softmax."""

import math

import pytest
import torch

from course import models
from course.checks import CheckFailed
from course.checks import decoding as check


def _attend(q, k, v, keep=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if keep is not None:
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, -1) @ v


def _cross(x, memory, attn, memory_mask=None, *, kv=None, mask="keys", causal=False):
    """Cross-attention by hand; ``kv``: where keys and values come from (memory),
    ``mask``: "keys", "ignored" or "inverted"."""
    B, Tq, D = x.shape
    H = attn.num_attention_heads
    source = memory if kv is None else kv

    def heads(linear, inputs):
        return linear(inputs).view(B, inputs.shape[1], H, -1).transpose(1, 2)

    q, k, v = heads(attn.query, x), heads(attn.key, source), heads(attn.value, source)
    Tk = k.shape[-2]
    keep = torch.ones(B, 1, Tq, Tk, dtype=torch.bool)
    if memory_mask is not None and mask != "ignored":
        real = memory_mask.bool() if mask == "keys" else ~memory_mask.bool()
        keep = keep & real[:, None, None, :]
    if causal:
        keep = keep & torch.ones(Tq, Tk, dtype=torch.bool).tril()
    return _attend(q, k, v, keep).transpose(1, 2).reshape(B, Tq, D)


def _cached(
    q, k, v, cache, *, where="after", offset=True, causal=True, dim=-2, new_only=False
):
    """``new_only``: the cache returned holds the new keys and values alone."""
    new = (k, v)
    if cache is not None:
        K0, V0 = cache
        pieces = ((K0, k), (V0, v)) if where == "after" else ((k, K0), (v, V0))
        k, v = (torch.cat(pair, dim) for pair in pieces)
    t, total = q.shape[-2], k.shape[-2]
    rows = torch.arange(t)[:, None] + (total - t if offset else 0)
    keep = torch.arange(total)[None, :] <= rows if causal else None
    return _attend(q, k, v, keep), new if new_only else (k, v)


def _greedy(model, ids, n, use_cache, *, feed="new", position=-1, new_only=False):
    """Greedy decoding by hand; ``feed``: "new" (the newest token with the cache),
    "whole" (every token, cache or not), "stale" (the prompt's last token)."""
    seq, past = ids, None
    with torch.no_grad():
        for _ in range(n):
            if use_cache:
                inp = {"new": seq[:, -1:], "whole": seq, "stale": ids[:, -1:]}[feed]
                out = model(
                    input_ids=seq if past is None else inp,
                    past_key_values=past,
                    use_cache=True,
                )
                past = out.past_key_values
            else:
                out = model(input_ids=seq, use_cache=False)
            token = out.logits[:, position].argmax(-1, keepdim=True)
            seq = torch.cat([seq, token], dim=1)
    return seq[:, ids.shape[1] :] if new_only else seq


def _sample(logits, temperature, generator, *, how="divide"):
    if temperature == 0:
        return logits.argmax(-1)
    scaled = {
        "divide": logits / temperature,
        "times": logits * temperature,
        "after": logits,
    }[how]
    probs = torch.softmax(scaled, -1)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]


def _translator_case(seed=0, Tq=5, Tk=5, B=3, heads=2):
    model = models.tiny_encoder_decoder(seed=seed, num_layers=1, num_heads=heads)
    src, mask, tgt = check._source_batch(100, B, Tk, Tq, seed)
    (attn, x, memory, memory_mask, out), *_ = check.cross_attention_io(
        model, src, mask, tgt
    )
    return attn, x, memory, memory_mask, out


def test_cross_attention_io_and_by_hand_are_the_module_own_output():
    """What a decoder's cross-attention module returned inside the model is what
    the check computes from the module (masked by the source padding), and what
    the projections by hand give."""
    attn, x, memory, memory_mask, out = _translator_case(Tq=4, Tk=6)
    assert not bool(memory_mask.all())  # padding the mask must hide
    mask = memory_mask.bool()
    torch.testing.assert_close(check._module_context(attn, x, memory, mask), out)
    by_hand = _stepped(check._cross_steps(attn, x, memory, mask), mask)
    torch.testing.assert_close(by_hand.float(), out, atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        torch.testing.assert_close(_cross(x, memory, attn, memory_mask), out)


def _stepped(steps, mask, mask_way=None):
    """The context the check's cross-attention steps give, done right, or with
    ``mask_way`` for the mask step (the third)."""
    state = {"keep": None if mask is None else mask[:, None, None, :]}
    for i, step in enumerate(steps):
        state = (mask_way if i == 2 and mask_way else step.right)(state)
    return state["c"]


def test_mask_on_queries_is_the_mask_added_along_the_queries():
    """A memory mask laid along the queries (B, 1, Tk, 1), added as -10000 or as
    float32's min, or filled in: padded query rows attend alike (or as unmasked,
    up to float32's rounding of the sum), the others as unmasked."""
    attn, x, memory, memory_mask, _ = _translator_case(Tq=6, Tk=6)
    B, T, D = x.shape
    H = attn.num_attention_heads
    with torch.no_grad():
        q, k, v = (
            lin(inputs).view(B, T, H, -1).transpose(1, 2)
            for lin, inputs in (
                (attn.query, x),
                (attn.key, memory),
                (attn.value, memory),
            )
        )
        s = q @ k.mT / math.sqrt(q.shape[-1])
        pad = 1.0 - memory_mask[:, None, :, None].float()  # (B, 1, Tq, 1)

        def added(fill):
            p = torch.softmax(s + pad * fill, -1)
            return (p @ v).transpose(1, 2).reshape(B, T, D)

        mask = memory_mask.bool()
        steps = check._cross_steps(attn, x, memory, mask)
        by_1e4, by_fill, by_inf = (
            _stepped(steps, mask, way) for way in check._on_queries(mask)
        )
    torch.testing.assert_close(by_1e4.float(), added(-10000.0), atol=1e-5, rtol=1e-5)
    want = added(torch.finfo(torch.float32).min)
    torch.testing.assert_close(by_fill.float(), want, atol=1e-5, rtol=1e-5)
    rows = ~mask  # (B, Tq): the padded positions' query rows are NaN
    assert bool(by_inf.isnan()[rows].all()) and not bool(by_inf.isnan()[~rows].any())


def test_cross_attention_passes_and_names_each_mistake():
    """Queries from x, keys and values from memory, padding masked, pass;
    keys/values from x, an ignored or inverted mask and a causal mask are each
    named; on equal lengths, queries and memory swapped are named too."""
    check.cross_attention_shape(_cross)
    check.cross_attention_random(_cross, seed=1)
    attn, x, memory, memory_mask, out = _translator_case(Tq=5, Tk=5)
    check._expect_cross(_cross, attn, x, memory, memory_mask, want=out)
    wrongs = {
        "kv-from-x": lambda x, m, a, mm: _cross(x, m, a, None, kv=x),
        "memory-mask-ignored": lambda *a: _cross(*a, mask="ignored"),
        "memory-mask-inverted": lambda *a: _cross(*a, mask="inverted"),
        "causal": lambda *a: _cross(*a, causal=True),
        "query-memory-swapped": lambda x, m, a, mm: _cross(m, x, a, mm),
    }
    for key, wrong in wrongs.items():
        with pytest.raises(CheckFailed) as err:
            check._expect_cross(wrong, attn, x, memory, memory_mask, want=out)
        assert key in err.value.mistakes, (key, str(err.value))


def test_cross_attention_swapped_by_its_shape_and_the_module_as_shortcut():
    """Where Tq != Tk, swapped inputs give (B, Tk, D) and are named by it; calling
    the module itself is turned off."""
    with pytest.raises(CheckFailed) as err:
        check.cross_attention_shape(lambda x, m, a, mm: _cross(m, x, a, mm))
    assert err.value.mistakes == ("query-memory-swapped",)
    with pytest.raises(CheckFailed, match="calling the module"):
        check.cross_attention_shape(
            lambda x, m, a, mm: a(x, encoder_hidden_states=m)[0]
        )


def test_causal_rows_are_the_last_rows_of_the_whole_causal_mask():
    """The attention of t new queries after P cached: the last t rows of the
    (P + t) causal mask; not offset, its first t rows."""
    gen = torch.Generator().manual_seed(2)
    q = torch.randn(1, 2, 3, 4, generator=gen, dtype=torch.float64)
    K, V = (torch.randn(1, 2, 7, 4, generator=gen, dtype=torch.float64) for _ in "kv")
    whole = torch.ones(7, 7, dtype=torch.bool).tril()
    torch.testing.assert_close(
        check._causal_rows(q, K, V, 4), _attend(q, K, V, whole[4:])
    )
    torch.testing.assert_close(
        check._causal_rows(q, K, V, 4, offset=False), _attend(q, K, V, whole[:3])
    )


def test_wrong_axis_shapes_are_the_other_concatenations():
    """A cat of 2 cached and 3 new tokens on the batch, head or feature dim gives
    these shapes, never the right one; with nothing cached there are none."""
    assert check._wrong_axis_shapes(1, 1, 5, 4, 3) == {
        (2, 1, 3, 4),
        (1, 2, 3, 4),
        (1, 1, 3, 8),
    }
    assert check._wrong_axis_shapes(2, 3, 4, 8, 4) == set()


def test_cached_attention_passes_and_names_each_mistake():
    """Appending to the cache and offsetting the causal mask passes; prepended
    keys, a mask not offset, no causal mask and a cat on the batch dim are each
    named."""
    check.cached_attention_prefill(_cached)
    check.cached_attention_steps(_cached)
    check.cached_attention_random(_cached, seed=3)
    wrongs = {
        "prepended": lambda *a: _cached(*a, where="before"),
        "not-offset": lambda *a: _cached(*a, offset=False),
        "no-causal": lambda *a: _cached(*a, causal=False),
        "wrong-axis": lambda *a: _cached(*a, dim=0),
    }
    for key, wrong in wrongs.items():
        with pytest.raises(CheckFailed) as err:
            check.cached_attention_random(wrong, seed=3)
        assert key in err.value.mistakes, (key, str(err.value))
    with pytest.raises(CheckFailed, match="torch's fused attention is turned off"):
        check.cached_attention_prefill(
            lambda q, k, v, c: (
                torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, is_causal=True
                ),
                (k, v),
            )
        )


def test_a_cache_of_the_new_tokens_alone_is_named_beside_the_mask():
    """The cache returned holds only the new keys and values: named alone, and
    beside a causal mask that is not offset; the control passes."""
    check.cached_attention_random(_cached, seed=3)
    with pytest.raises(CheckFailed, match="holds only the new keys") as err:
        check.cached_attention_random(lambda *a: _cached(*a, new_only=True), seed=3)
    assert err.value.mistakes == ("cache-new-only",)
    with pytest.raises(CheckFailed, match="Also: the cached K") as err:
        check.cached_attention_random(
            lambda *a: _cached(*a, new_only=True, offset=False), seed=3
        )
    assert err.value.mistakes == ("not-offset", "cache-new-only")


def test_feeding_mistake_and_stale_tokens_read_what_was_fed():
    """(new tokens, keys) per call: the whole sequence each step without or with
    the cache, or one token without it, is each named; one new token over a
    growing cache is none. A cached step that read another token is stale."""
    grow = [(5, 5), (1, 6), (1, 7)]
    assert check._feeding_mistake(grow, 5, use_cache=True) is None
    assert check._feeding_mistake([(5, 5), (6, 6), (7, 7)], 5, True) == (
        check.CACHE_IGNORED
    )
    assert check._feeding_mistake([(5, 5), (6, 6), (7, 7)], 5, False) is None
    assert check._feeding_mistake([(5, 5), (6, 11)], 5, True) == (
        check.WHOLE_WITH_CACHE
    )
    assert check._feeding_mistake([(5, 5), (1, 1)], 5, True) == (
        check.ONE_TOKEN_NO_CACHE
    )
    tokens = torch.tensor([[1, 2, 3, 9, 8]])
    fed = [tokens[:, :3], torch.tensor([[9]]), torch.tensor([[8]])]
    assert not check._fed_stale(fed, tokens, 3)
    assert check._fed_stale([fed[0], torch.tensor([[3]]), fed[2]], tokens, 3)


def test_greedy_generate_passes_and_names_each_mistake():
    """The loop by hand passes, with and without the cache; new tokens only, the
    cache ignored, the whole sequence with the cache, the first position's
    logits and a stale token are each named; generate is the shortcut."""
    check.greedy_generate_no_cache(_greedy)
    check.greedy_generate_cache(_greedy)
    check.greedy_generate_random(_greedy, seed=4)
    model = check._decoder(5, 4, 2, 8, 100, 2)
    prompt = check._decisive_prompt(model, 2, 4, 5, torch.Generator().manual_seed(5))
    check._expect_greedy(_greedy, model, prompt, 5, True, "here")
    wrongs = {
        (False, "new-only"): lambda *a: _greedy(*a, new_only=True),
        (True, "cache-ignored"): lambda m, i, n, c: _greedy(m, i, n, False),
        (True, "whole-with-cache"): lambda *a: _greedy(*a, feed="whole"),
        (False, "first-position"): lambda *a: _greedy(*a, position=0),
        (True, "stale-token"): lambda *a: _greedy(*a, feed="stale"),
    }
    for (use_cache, key), wrong in wrongs.items():
        with pytest.raises(CheckFailed) as err:
            check._expect_greedy(wrong, model, prompt, 5, use_cache, "here")
        assert err.value.mistakes == (key,), str(err.value)
    with pytest.raises(CheckFailed, match="model.generate is turned off"):
        check._expect_greedy(
            lambda m, i, n, c: m.generate(i, max_new_tokens=n, do_sample=False),
            model,
            prompt,
            5,
            False,
            "here",
        )


def test_frequencies_and_distance_count_draws():
    """Draws counted per row, DRAWS each, and the largest total variation
    distance between rows of distributions."""
    rows, vocab = 2, 3
    tokens = torch.cat(
        [torch.zeros(check.DRAWS, dtype=torch.long), torch.arange(check.DRAWS) % 2 + 1]
    )
    got = check._frequencies(tokens, rows, vocab)
    torch.testing.assert_close(
        got, torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]], dtype=torch.float64)
    )
    assert check._distance(got, got) == 0.0
    assert check._distance(got, got.flip(0)) == pytest.approx(1.0)


def test_sampling_mistakes_are_distributions_told_apart_from_the_right_one():
    """Each mistake's distribution sums to 1 and is far from softmax(logits / T)
    on spread logits at T = 1.8 or 2.5; at T = 0.4 the argmax is near the right
    one, and at T = 1 the temperature's mistakes are it: not separated."""
    logits = check._spread_logits(3, 7, torch.Generator().manual_seed(6))
    for temperature in (1.8, 2.5):
        wrong = check._sampling_mistakes(logits, temperature)
        for p in wrong.values():
            torch.testing.assert_close(p.sum(-1), torch.ones(3, dtype=torch.float64))
        assert check._separated(logits, temperature)
    right = torch.softmax(logits.double() / 0.4, -1)
    argmax = torch.nn.functional.one_hot(logits.argmax(-1), 7).double()
    assert check._distance(argmax, right) < 3 * check.TOLERANCE
    assert not check._separated(logits, 0.4)
    assert not check._separated(logits, 1.0)


def test_sample_next_passes_and_names_each_mistake():
    """Draws from softmax(logits / T) with the generator pass; the temperature
    after the softmax or multiplied, the argmax always, and the generator
    ignored are each named; a division by 0 gets the argmax hint."""
    check.sample_next_shape(_sample)
    check.sample_next_greedy(_sample)
    check.sample_next_distribution(_sample)
    check.sample_next_random(_sample, seed=7)

    def unseeded(logits, temperature, generator):
        return _sample(logits, temperature, None)

    wrongs = {
        "temperature-after-softmax": lambda *a: _sample(*a, how="after"),
        "times": lambda *a: _sample(*a, how="times"),
        "argmax": lambda logits, t, g: logits.argmax(-1),
        "generator": unseeded,
    }
    for key, wrong in wrongs.items():
        with pytest.raises(CheckFailed) as err:
            check.sample_next_distribution(wrong)
        assert err.value.mistakes == (key,)

    def divide_by_zero(logits, temperature, generator):
        probs = torch.softmax(logits / temperature, -1)
        return torch.multinomial(probs, 1, generator=generator)[:, 0]

    with pytest.raises(CheckFailed, match="temperature=0 means the argmax"):
        check.sample_next_greedy(divide_by_zero)
