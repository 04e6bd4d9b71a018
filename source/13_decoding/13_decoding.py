# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 13 · Decoding with attention: cross-attention, a KV cache, sampling
#
# BERT reads a whole text at once. A decoder writes one: it predicts a token,
# appends it, and predicts the next, each step attending over everything written
# so far. Four pieces make that work, and this notebook writes each
# by hand and checks it against transformers' own models:
#
# | piece | what it does | your code |
# |---|---|---|
# | cross-attention | lets a decoder read an encoder's output (translation) | `cross_attention` |
# | the KV cache | keeps the keys and values of earlier tokens, so a step computes only the new one's | `cached_attention` |
# | the decoding loop | greedy decoding, with and without the cache | `greedy_generate` |
# | sampling | draws the next token, with a temperature | `sample_next` |
#
# The models are built here with random weights (no download): an
# encoder-decoder made of two BERTs, and a Llama-style decoder. Their words are
# noise; what they compute is the real thing.

# %%
import math

import matplotlib.pyplot as plt
import torch

from course import data, models, viz
from course.checks import decoding as check

model, tokenizer = models.load()
H = model.config.num_attention_heads
d = model.config.hidden_size // H
torch.manual_seed(0)  # the demos below draw random tensors
translator = check.course_translator()  # encoder-decoder: two random BERTs
decoder = check.course_decoder()  # a random Llama-style decoder
print(H, "heads of size", d)
print("translator:", translator.config.decoder.num_hidden_layers, "decoder layers")
print("decoder:", decoder.config.num_key_value_heads, "K/V heads")

# %% [markdown]
# ## 1. Cross-attention
#
# In an encoder-decoder (the original Transformer, and translation models since),
# each decoder layer attends twice. First to the target written so far, with a
# causal mask (notebook 08). Then to the source: **cross-attention**. Its queries
# come from the decoder's states `x` (B, Tq, D); its keys and values come from
# the encoder's output `memory` (B, Tk, D). The source is known in full before
# decoding starts, so there is no causal mask here, only the source's padding:
# `memory_mask` (B, Tk) holds 1 for a real token and 0 for padding.
#
# The module is `attn = translator.decoder.bert.encoder.layer[i].crossattention.self`:
# three linear layers `attn.query`, `attn.key`, `attn.value`, with
# `attn.num_attention_heads` heads of `attn.attention_head_size`. It returns the
# context with the heads merged back, (B, Tq, D), before the output projection.
#
# **Exercise 1.** Write `cross_attention(x, memory, attn, memory_mask=None)`:
# (B, Tq, D), what `attn` returns for `x` attending over `memory`. Tq and Tk may
# differ. Compute it by hand from `attn.query`, `attn.key` and `attn.value`:
# calling `attn` itself, or torch's fused `scaled_dot_product_attention`, is
# turned off while the tests run.


# %% answer="cross_attention"
def cross_attention(x, memory, attn, memory_mask=None):
    """Queries from x (B, Tq, D), keys and values from memory (B, Tk, D)."""
    ### BEGIN SOLUTION
    B, Tq, D = x.shape
    Tk = memory.shape[1]
    h, size = attn.num_attention_heads, attn.attention_head_size
    q = attn.query(x).view(B, Tq, h, size).transpose(1, 2)  # (B, H, Tq, d)
    k = attn.key(memory).view(B, Tk, h, size).transpose(1, 2)  # (B, H, Tk, d)
    v = attn.value(memory).view(B, Tk, h, size).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(size)  # (B, H, Tq, Tk)
    if memory_mask is not None:
        blocked = memory_mask[:, None, None, :] == 0  # (B, 1, 1, Tk)
        scores = scores.masked_fill(blocked, float("-inf"))
    context = torch.softmax(scores, dim=-1) @ v  # (B, H, Tq, d)
    return context.transpose(1, 2).reshape(B, Tq, D)
    ### END SOLUTION


# %%
def compare_cross(translator, source, target):
    """Compare cross_attention with each cross-attention module's own output."""
    src = tokenizer([source], return_tensors="pt")
    tgt = tokenizer([target], return_tensors="pt")["input_ids"]
    seen = check.cross_attention_io(
        translator, src["input_ids"], src["attention_mask"], tgt
    )
    with torch.no_grad():
        for i, (attn, x, memory, memory_mask, returned) in enumerate(seen):
            mine = cross_attention(x, memory, attn, memory_mask)
            print(f"layer {i}: {tuple(mine.shape)}, largest difference", end=" ")
            print(f"{(mine - returned).abs().max():.1e}")


compare_cross(translator, data.SAMPLE_TEXT, "the cat sat on the mat")

# %% test="test_cross_attention_shape" points=1
"""cross_attention gives one context per query, (B, Tq, D), when Tq != Tk."""
check.cross_attention_shape(cross_attention)

# %% test="test_cross_attention_translator" points=1
"""cross_attention gives what the translator's cross-attention modules return."""
check.cross_attention_translator(cross_attention)

# %% test="test_cross_attention_random" points=2
"""cross_attention is right for other heads, sizes, lengths and padding."""
### BEGIN HIDDEN TESTS
check.cross_attention_random(cross_attention, seed=1301)
### END HIDDEN TESTS

# %% [markdown]
# bertviz's head view draws all three attentions of an encoder-decoder: pick
# "Cross" in its menu to see each target token's weights over the source
# tokens. Every row of a cross-attention head sums to 1 over the source, and the
# weights are random here, so the pattern carries no meaning.


# %%
def cross_view(translator, source, target):
    """bertviz's head view of the translator reading source and writing target."""
    src = tokenizer([source], return_tensors="pt")
    tgt = tokenizer([target], return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = translator(
            input_ids=src["input_ids"], decoder_input_ids=tgt, output_attentions=True
        )
    return viz.head_view(
        None,
        None,
        encoder_attention=out.encoder_attentions,
        decoder_attention=out.decoder_attentions,
        cross_attention=out.cross_attentions,
        encoder_tokens=tokenizer.convert_ids_to_tokens(src["input_ids"][0]),
        decoder_tokens=tokenizer.convert_ids_to_tokens(tgt[0]),
    )


cross_view(translator, data.SAMPLE_TEXT, "the cat sat on the mat")

# %% [markdown]
# ## 2. A KV cache
#
# A decoder writing token t + 1 needs the query of token t and the keys and
# values of tokens 0 to t. The keys and values of tokens 0 to t - 1 were
# already computed at the earlier steps, and they have not changed: a causal
# mask means no token's states depend on a later token. So a decoder keeps them,
# the **KV cache**: per layer, K and V of every token so far, each (B, H, P, d)
# for P tokens. A step computes q, k, v for the new tokens only, appends k and v
# to the cache along the time axis (dim -2), and attends.
#
# The first call reads the whole prompt at once (the *prefill*): t new tokens
# and an empty cache, with the causal mask. After it, each step brings one new
# token. In general t new tokens follow P cached ones: new token i sits at
# position P + i and sees keys 0 to P + i, the last t rows of the (P + t, P + t)
# causal mask.
#
# **Exercise 2.** Write `cached_attention(q, k, v, cache=None)`: q, k, v
# (B, H, t, d) for t new tokens; `cache` None or a pair `(K, V)` of the tokens
# before them, each (B, H, P, d). Return the pair `(context, cache)`: the new
# queries' context (B, H, t, d), and the cache with the new keys and values
# appended, a pair `(K, V)` of (B, H, P + t, d). Attend by hand (scores, mask,
# softmax): torch's fused `scaled_dot_product_attention` is turned off while the
# tests run.


# %% answer="cached_attention"
def cached_attention(q, k, v, cache=None):
    """Causal attention of t new tokens over the cached ones and themselves."""
    ### BEGIN SOLUTION
    if cache is not None:
        k = torch.cat([cache[0], k], dim=-2)  # (B, H, P + t, d)
        v = torch.cat([cache[1], v], dim=-2)
    t, total = q.shape[-2], k.shape[-2]
    rows = torch.arange(total - t, total)[:, None]  # positions of the new tokens
    allowed = torch.arange(total)[None, :] <= rows  # (t, P + t)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, t, P + t)
    scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v, (k, v)
    ### END SOLUTION


# %% [markdown]
# Below, a prompt of 4 tokens and then 3 steps of one token each, against
# torch's causal attention over the whole sequence at once:


# %%
def compare_cache(steps=(4, 1, 1, 1)):
    """Feed cached_attention in chunks; compare with attention over all tokens."""
    T = sum(steps)
    Q, K, V = (torch.randn(1, H, T, d) for _ in range(3))
    full = torch.nn.functional.scaled_dot_product_attention(Q, K, V, is_causal=True)
    cache, start = None, 0
    for t in steps:
        end = start + t
        new = slice(start, end)
        context, cache = cached_attention(
            Q[..., new, :], K[..., new, :], V[..., new, :], cache
        )
        gap = (context - full[..., new, :]).abs().max()
        print(f"{t} new: cache K {tuple(cache[0].shape)}, largest difference {gap:.1e}")
        start = end


compare_cache()

# %% test="test_cached_attention_prefill" points=1
"""With no cache: causal attention over the prompt, and its K and V as the cache."""
check.cached_attention_prefill(cached_attention)

# %% test="test_cached_attention_steps" points=1
"""A prefill, then steps of one and two tokens: the same as attention over all."""
check.cached_attention_steps(cached_attention)

# %% test="test_cached_attention_random" points=2
"""cached_attention is right for other batches, heads, sizes and chunks."""
### BEGIN HIDDEN TESTS
check.cached_attention_random(cached_attention, seed=1302)
### END HIDDEN TESTS

# %% [markdown]
# ## 3. Greedy decoding, with and without the cache
#
# transformers' decoders keep exactly this cache for you. Call the model with
# `use_cache=True` and its output has `past_key_values`, the K and V of every
# layer (a `DynamicCache`); give it back with the next call, and the model reads
# only the tokens you feed it, attending over the cached ones too.
#
# *Greedy* decoding takes the most likely next token each time: the argmax of the
# logits at the last position, `out.logits[:, -1]`. Without a cache, each step
# feeds the whole sequence so far. With one, the first call feeds the prompt and
# each later call feeds only the token just chosen, with the cache.
#
# **Exercise 3.** Write `greedy_generate(model, input_ids, max_new_tokens,
# use_cache)`: `input_ids` (B, T); return (B, T + max_new_tokens), the prompt
# followed by the tokens chosen, a LongTensor. With `use_cache=True`, each step
# after the first feeds one new token and the cache the model returned.


# %% answer="greedy_generate"
def greedy_generate(model, input_ids, max_new_tokens, use_cache):
    """Greedy decoding; with use_cache=True one new token per step."""
    ### BEGIN SOLUTION
    tokens, past = input_ids, None
    fed = input_ids
    with torch.no_grad():
        for _ in range(max_new_tokens):
            out = model(fed, past_key_values=past, use_cache=use_cache)
            best = out.logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
            tokens = torch.cat([tokens, best], dim=1)
            if use_cache:
                fed, past = best, out.past_key_values
            else:
                fed = tokens
    return tokens
    ### END SOLUTION


# %% [markdown]
# The two ways give the same tokens, but they do not read the same number of
# tokens: without the cache, step s reads the prompt and all s tokens chosen
# before it again.


# %%
def compare_decoding(prompt, n=8):
    """Greedy tokens with and without the cache, and how many tokens each read."""
    ids = tokenizer([prompt], return_tensors="pt")["input_ids"]
    for use_cache in (False, True):
        out, read = check.tokens_read(
            decoder, lambda cache=use_cache: greedy_generate(decoder, ids, n, cache)
        )
        print(
            f"use_cache={use_cache}: read {sum(read):3} tokens,", out[0, -n:].tolist()
        )
    print(f"the prompt has {ids.shape[1]} tokens")


compare_decoding(data.SAMPLE_TEXT)

# %% [markdown]
# With a prompt of T tokens and n new ones, the uncached loop reads
# T + (T + 1) + ... + (T + n - 1) tokens, the cached one T + (n - 1): one per
# step after the prefill. Each read token costs a pass through every layer, so
# the cache turns a cost that grows with the square of the length into one that
# grows with the length (attention itself still looks at all cached keys).

# %% test="test_greedy_generate_no_cache" points=1
"""greedy_generate(use_cache=False) gives transformers' greedy tokens."""
check.greedy_generate_no_cache(greedy_generate)

# %% test="test_greedy_generate_cache" points=1
"""greedy_generate(use_cache=True) gives the same tokens, one new token a step."""
check.greedy_generate_cache(greedy_generate)

# %% test="test_greedy_generate_random" points=2
"""Other decoders, batches and lengths: same tokens and logits either way."""
### BEGIN HIDDEN TESTS
check.greedy_generate_random(greedy_generate, seed=1303)
### END HIDDEN TESTS

# %% [markdown] task="why_cache" points=2
# **Written answer.** Why do greedy decoding with and without the cache give the
# same tokens? And why could BERT, which reads a text in both directions, not
# keep such a cache while a text grows?
#
# Write your answer in the cell below.
#
# === BEGIN MARK SCHEME ===
# **Model answer.** In a decoder every layer's attention is causal, so a token's
# states, and the keys and values made from them, depend only on that token and
# the ones before it. Appending a token changes nothing about the earlier tokens:
# the K and V that the uncached loop computes again are the same numbers the
# cache kept, so every step's logits, and their argmax, are the same (up to
# float rounding). In BERT each token attends to the tokens after it too; a new
# token changes the states of every earlier token in every layer above the
# first, so their cached keys and values would be out of date, and each step
# would have to read the whole text again.
#
# **Rubric (2 points).**
#
# * 1 point: causal attention: an earlier token's K and V do not depend on later
#   tokens, so the cached values are exactly what would be recomputed (same
#   logits, same argmax).
# * 1 point: in a bidirectional encoder a new token changes the earlier tokens'
#   states (above the first layer), so cached K/V would be stale.
# === END MARK SCHEME ===

# %% [markdown] open=true
# YOUR ANSWER HERE

# %% [markdown]
# ## 4. Sampling with a temperature
#
# Greedy decoding always writes the same text, and often repeats itself.
# Sampling draws the next token from the model's distribution instead. The
# *temperature* reshapes that distribution first: divide the logits by it, then
# take the softmax. Below 1 the likely tokens get likelier; above 1 the
# distribution flattens; at 0 only the argmax is left (greedy decoding).
#
# **Exercise 4.** Write `sample_next(logits, temperature, generator)`: `logits`
# (B, V); return (B,), one token id per row, a LongTensor, drawn from
# softmax(logits / temperature) with the `torch.Generator` you are given (so
# the same generator state gives the same tokens). `temperature=0` means the
# argmax.


# %% answer="sample_next"
def sample_next(logits, temperature, generator):
    """One token per row of logits (B, V), drawn at this temperature."""
    ### BEGIN SOLUTION
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits / temperature, dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]
    ### END SOLUTION


# %%
def draw_temperatures(logits, temperatures=(0.5, 1.0, 2.0), draws=2000):
    """How often each token is drawn, at three temperatures."""
    gen = torch.Generator().manual_seed(0)
    fig, axes = plt.subplots(1, len(temperatures), figsize=(9, 2.5), sharey=True)
    for ax, t in zip(axes, temperatures, strict=True):
        tokens = sample_next(logits.repeat(draws, 1), t, gen)
        counts = torch.bincount(tokens, minlength=logits.shape[-1]) / draws
        ax.bar(range(logits.shape[-1]), counts)
        ax.set_title(f"temperature {t}: top token {counts[logits.argmax()]:.0%}")
        ax.set_xlabel("token")
    plt.show()


draw_temperatures(torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0]]))

# %% [markdown]
# The most likely token (token 0) wins more often the lower the temperature: at
# 0.5 it is drawn most of the time, at 2 well under half the time.

# %% test="test_sample_next_shape" points=1
"""sample_next gives one token id per row, a LongTensor of shape (B,)."""
check.sample_next_shape(sample_next)

# %% test="test_sample_next_greedy" points=1
"""At temperature 0, sample_next is the argmax of each row."""
check.sample_next_greedy(sample_next)

# %% test="test_sample_next_distribution" points=1
"""The draws follow softmax(logits / temperature); the generator decides them."""
check.sample_next_distribution(sample_next)

# %% test="test_sample_next_random" points=2
"""sample_next is right for other vocabularies, rows and temperatures."""
### BEGIN HIDDEN TESTS
check.sample_next_random(sample_next, seed=1304)
### END HIDDEN TESTS
