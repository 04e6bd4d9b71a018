# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 12 · A modern encoder: rotary positions, sliding windows, shared K/V heads
#
# BERT's attention is where today's models started, not where they are. Three
# changes are in nearly every model since 2023, encoders and decoders alike:
#
# | change | what it replaces | where | your code |
# |---|---|---|---|
# | rotary positions | a position vector added to each token once | ModernBERT, Llama, Qwen | `rotary` |
# | sliding-window layers | every query sees every key | ModernBERT, Gemma, Mistral | `sliding_window_mask` |
# | shared K/V heads | one K and V per query head | Llama, Qwen, Mistral | `grouped_query_attention` |
#
# Each one you write by hand and check against transformers' own models:
# ModernBERT (the encoder that replaces BERT in new work) and a Llama-style
# decoder, both built here with random weights (no download). Then you put two of
# them together into one ModernBERT layer's attention, and count what shared heads
# save in memory.

# %%
import math

import matplotlib.pyplot as plt
import torch

from course import data, models, viz
from course.checks import modern as check

model, tokenizer = models.load()
H = model.config.num_attention_heads
d = model.config.hidden_size // H
torch.manual_seed(0)  # the demos below draw random vectors
encoder = check.course_encoder()  # a random ModernBERT with the course model's heads
config = encoder.config
print(config.num_hidden_layers, "layers:", config.layer_types)
print(H, "heads of size", d, "| window", config.local_attention)
print({kind: p["rope_theta"] for kind, p in config.rope_parameters.items()})

# %% [markdown]
# ## 1. Rotary positions
#
# BERT adds a learned position vector to each token's embedding, once, before
# layer 0. ModernBERT adds nothing. Instead, in every layer, it **rotates** each
# query and each key by an angle that grows with the token's position. The d
# features of a head form d/2 pairs, and pair i turns by the angle
#
# $$\theta_{p,i} = p \cdot \text{base}^{-2i/d}, \qquad i = 0, \dots, d/2 - 1,$$
#
# for a token at position p: the first pairs turn fast, the last ones slowly.
# Which features form a pair is a convention, and the two in use are not
# compatible. ModernBERT and Llama pair feature i with feature i + d/2 (the
# first half with the second half); GPT-J and RoFormer pair neighbours (0, 1),
# (2, 3), .... With $x_1$ the first half and $x_2$ the second, ModernBERT's
# rotation is
#
# $$\text{rotary}(x) = x \cos\theta + \text{rotate\_half}(x) \sin\theta, \qquad
# \text{rotate\_half}(x) = (-x_2, x_1),$$
#
# where $\cos\theta$ and $\sin\theta$ have the d/2 angles twice, once for each
# half.
#
# **Exercise 1.** Write `rotary(x, positions, base=10000.0)`: rotate the last dim
# of `x` (..., T, d) by `positions` (T,), a tensor of integers, in ModernBERT's
# layout. The shape stays the same.


# %% answer="rotary"
def rotary(x, positions, base=10000.0):
    """Rotate x (..., T, d) by positions (T,): pair i with i + d/2."""
    ### BEGIN SOLUTION
    d = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)  # (d/2,)
    angles = positions.float()[:, None] * inv_freq  # (T, d/2)
    cos = torch.cat([angles.cos(), angles.cos()], dim=-1)  # (T, d)
    sin = torch.cat([angles.sin(), angles.sin()], dim=-1)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin
    ### END SOLUTION


# %%
q = torch.randn(1, H, 6, d)
print(tuple(rotary(q, torch.arange(6)).shape))
print(
    "position 0 is not turned:",
    torch.allclose(rotary(q, torch.zeros(6))[..., 0, :], q[..., 0, :]),
)
print(
    "lengths kept:",
    torch.allclose(rotary(q, torch.arange(6)).norm(dim=-1), q.norm(dim=-1), atol=1e-5),
)

# %% test="test_rotary_shape" points=1
"""rotary keeps the shape of (B, H, T, d) queries."""
check.rotary_shape(rotary)

# %% test="test_rotary_modernbert" points=1
"""rotary equals ModernBERT's rotary embedding, with both of its bases."""
check.rotary_modernbert(rotary)

# %% test="test_rotary_random" points=2
"""rotary is right for other head sizes, bases, leading dims and positions."""
### BEGIN HIDDEN TESTS
check.rotary_random(rotary, seed=1201)
### END HIDDEN TESTS

# %% [markdown]
# ### Why rotate: the score sees only the offset
#
# Rotate a query at position m and a key at position n. Their dot product is
# that of q turned by mθ and k turned by nθ, which is q against k turned by
# (n - m)θ: it depends on the positions only through **n - m**, how far apart
# the two tokens are. Move both tokens by the same amount and every score stays
# the same:

# %%
qv, kv = torch.randn(d), torch.randn(d)


def score(m, n):
    """The rotated query at position m against the rotated key at position n."""
    return float(
        rotary(qv[None], torch.tensor([m])) @ rotary(kv[None], torch.tensor([n]))[0]
    )


for m, n in [(3, 1), (10, 8), (103, 101), (3, 5)]:
    print(f"query at {m:3}, key at {n:3} (offset {n - m:+}): score {score(m, n):+.4f}")

# %% [markdown]
# The first three pairs are two apart in the same order, and their scores agree
# to four decimals; the last pair is two apart the other way, and its score
# differs. BERT's added position vectors give no such guarantee: the score of
# $(x_m + p_m) \cdot (x_n + p_n)$ has terms in $p_m$ and $p_n$ on their own.

# %% [markdown] task="why_offset" points=2
# **Written answer.** Why does the score of a rotated query and a rotated key
# depend only on their offset? Say it for one pair of features (a rotation in a
# plane), then say what this buys a model that BERT's added positions do not.
#
# Write your answer in the cell below.
#
# === BEGIN MARK SCHEME ===
# **Model answer.** For one pair, rotary turns the query's 2-vector by mθ and the
# key's by nθ. A rotation keeps dot products: $R(m\theta)q \cdot R(n\theta)k =
# q \cdot R(-m\theta)R(n\theta)k = q \cdot R((n - m)\theta)k$, so only n - m is
# left; the score is a sum of such pairs, each with its own θ. The model
# therefore scores "the word two to my left" the same wherever the two words
# stand: attention patterns learned at one place hold at every place (and
# positions are not a fixed table of 512 rows, so longer texts still get
# positions). Added vectors mix absolute positions into the content, and the
# score has terms in each position alone.
#
# **Rubric (2 points).**
#
# * 1 point: the rotation argument: a rotation keeps dot products (or the angles
#   subtract), so only the difference of the two angles, (n - m)θ, is left.
# * 1 point: what it buys: patterns that depend on distance hold at every
#   position (or: no table of absolute positions; longer inputs), unlike added
#   vectors, whose score has terms in the absolute positions.
# === END MARK SCHEME ===

# %% [markdown] open=true
# YOUR ANSWER HERE

# %% [markdown]
# ## 2. Sliding windows
#
# A query that sees every key costs T² scores per head. ModernBERT keeps that for
# one layer in three (`full_attention`); in the others (`sliding_attention`) a
# query sees only the keys at most `local_attention // 2` positions away, on either
# side. Far-away tokens still reach each other: each global layer connects every
# token, and each local layer passes information `local_attention // 2` positions
# further.
#
# **Exercise 2.** Write `sliding_window_mask(T, window)`: a (T, T) bool tensor,
# True where query i may attend to key j, that is where |i - j| ≤ window // 2.


# %% answer="sliding_window_mask"
def sliding_window_mask(T, window):
    """(T, T) bool: True where |query - key| <= window // 2."""
    ### BEGIN SOLUTION
    i = torch.arange(T)
    return (i[:, None] - i[None, :]).abs() <= window // 2
    ### END SOLUTION


# %%
plt.figure(figsize=(3, 3))
plt.imshow(sliding_window_mask(12, config.local_attention), cmap="Greys")
plt.xlabel("key")
plt.ylabel("query")
plt.title(f"window {config.local_attention}")
plt.show()

# %% test="test_sliding_window_mask_shape" points=1
"""sliding_window_mask gives a (T, T) bool tensor."""
check.sliding_window_mask_shape(sliding_window_mask)

# %% test="test_sliding_window_mask_modernbert" points=1
"""sliding_window_mask is where ModernBERT's local layers let a query look."""
check.sliding_window_mask_modernbert(sliding_window_mask)

# %% test="test_sliding_window_mask_random" points=2
"""sliding_window_mask is right for other lengths and windows, odd ones too."""
### BEGIN HIDDEN TESTS
check.sliding_window_mask_random(sliding_window_mask, seed=1202)
### END HIDDEN TESTS

# %% [markdown]
# The encoder's own attention shows it. Below, bertviz's head view of the sample
# text: layer 0 is global, its lines reach every token; in layers 1 and 2 (local)
# each token's lines stop `local_attention // 2` tokens away. The weights are
# random, so the pattern is all there is to read.

# %%
enc = tokenizer(data.SAMPLE_TEXT, return_tensors="pt")
with torch.no_grad():
    attentions = encoder(enc["input_ids"], output_attentions=True).attentions
tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
viz.head_view(attentions, tokens)

# %% [markdown]
# ## 3. A ModernBERT layer's attention, by hand
#
# Now one whole attention module of `encoder`, `attn = encoder.layers[i].attn`:
#
# 1. `attn.Wqkv` is one fused linear layer for Q, K and V: its output (B, T, 3·D)
#    is Q, K, V one after the other, each H heads of `attn.head_dim`, so view it
#    as (B, T, 3, H, d);
# 2. rotate Q and K (not V) with your `rotary` at positions 0..T-1, with the
#    base of this layer's type: `attn.config.layer_types[attn.layer_idx]` is
#    `"full_attention"` or `"sliding_attention"`, and
#    `attn.config.rope_parameters[that type]["rope_theta"]` its base;
# 3. scaled dot-product attention, with your window mask (window
#    `attn.config.local_attention`) on sliding layers only;
# 4. merge the heads and apply `attn.Wo`.
#
# No padding here: every token may be attended.
#
# **Exercise 3.** Write `modernbert_attention(attn, hidden)`: (B, T, D) → (B, T, D),
# what `attn` returns for `hidden`.


# %% answer="modernbert_attention"
def modernbert_attention(attn, hidden):
    """A ModernBertAttention module's output for hidden (B, T, D), by hand."""
    ### BEGIN SOLUTION
    B, T, D = hidden.shape
    kind = attn.config.layer_types[attn.layer_idx]
    qkv = attn.Wqkv(hidden).view(B, T, 3, -1, attn.head_dim)
    q, k, v = (t.transpose(1, 2) for t in qkv.unbind(dim=2))  # (B, H, T, d)
    base = attn.config.rope_parameters[kind]["rope_theta"]
    q, k = rotary(q, torch.arange(T), base), rotary(k, torch.arange(T), base)
    scores = q @ k.transpose(-2, -1) / math.sqrt(attn.head_dim)  # (B, H, T, T)
    if kind == "sliding_attention":
        allowed = sliding_window_mask(T, attn.config.local_attention)
        scores = scores.masked_fill(~allowed, float("-inf"))
    context = torch.softmax(scores, dim=-1) @ v  # (B, H, T, d)
    return attn.Wo(context.transpose(1, 2).reshape(B, T, D))
    ### END SOLUTION


# %%
def compare_layers(encoder, input_ids):
    """Compare modernbert_attention with each attention module's own output."""
    with torch.no_grad():
        for attn, given, returned in check.attention_io(encoder, input_ids):
            mine = modernbert_attention(attn, given)
            kind = attn.config.layer_types[attn.layer_idx]
            gap = (mine - returned).abs().max()
            print(f"layer {attn.layer_idx} ({kind}): largest difference {gap:.1e}")


compare_layers(encoder, enc["input_ids"])

# %% test="test_modernbert_attention_global" points=1
"""modernbert_attention gives the encoder's global layer's output."""
check.modernbert_attention_global(modernbert_attention)

# %% test="test_modernbert_attention_local" points=1
"""modernbert_attention gives the encoder's sliding-window layers' outputs."""
check.modernbert_attention_local(modernbert_attention)

# %% test="test_modernbert_attention_random" points=2
"""modernbert_attention is right for every layer of other random ModernBERTs."""
### BEGIN HIDDEN TESTS
check.modernbert_attention_random(modernbert_attention, seed=1204)
### END HIDDEN TESTS

# %% [markdown]
# ## 4. Shared K/V heads
#
# To generate text, a decoder keeps every earlier token's keys and values (the
# *KV cache*, notebook 13), and for long texts that cache, not the weights, fills
# the memory. Grouped-query attention keeps fewer K/V heads than query heads:
# with H query heads and H_kv K/V heads, each K/V head serves a group of
# g = H / H_kv query heads, **in order**: query heads 0..g-1 use K/V head 0, the
# next g use head 1, and so on (transformers' `repeat_kv`). H_kv = 1 is
# multi-query attention; H_kv = H is plain multi-head attention.
#
# **Exercise 4.** Write `grouped_query_attention(Q, K, V, mask=None)`: Q (B, H, T, d),
# K and V (B, H_kv, T, d), `mask` bool (True = may attend), broadcastable to
# (B, H, T, T). Query head h uses K/V head h // g.


# %% answer="grouped_query_attention"
def grouped_query_attention(Q, K, V, mask=None):
    """Q (B, H, T, d), K and V (B, H_kv, T, d) -> (B, H, T, d)."""
    ### BEGIN SOLUTION
    group = Q.shape[1] // K.shape[1]
    K = K.repeat_interleave(group, dim=1)  # (B, H, T, d)
    V = V.repeat_interleave(group, dim=1)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])  # (B, H, T, T)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V
    ### END SOLUTION


# %%
Q, K, V = torch.randn(1, 8, 5, 16), torch.randn(1, 2, 5, 16), torch.randn(1, 2, 5, 16)
print(tuple(grouped_query_attention(Q, K, V).shape))

# %% test="test_grouped_query_attention_shape" points=1
"""grouped_query_attention gives one context per query head."""
check.grouped_query_attention_shape(grouped_query_attention)

# %% test="test_grouped_query_attention_llama" points=1
"""Fed a Llama layer's Q, K, V, then its output projection: the layer's output."""
check.grouped_query_attention_llama(grouped_query_attention)

# %% test="test_grouped_query_attention_random" points=2
"""grouped_query_attention is right for other head counts, sizes and masks."""
### BEGIN HIDDEN TESTS
check.grouped_query_attention_random(grouped_query_attention, seed=1203)
### END HIDDEN TESTS

# %% [markdown]
# ## 5. What the cache costs
#
# For every layer the cache holds K and V, each (batch, H_kv, T, d), at
# `bytes_per_value` bytes a number (2 for float16 and bfloat16).
#
# **Exercise 5.** Write `kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len,
# batch=1, bytes_per_value=2)`: the bytes of that cache, an int.


# %% answer="kv_cache_bytes"
def kv_cache_bytes(
    num_layers, num_kv_heads, head_dim, seq_len, batch=1, bytes_per_value=2
):
    """Bytes of a KV cache: K and V of every layer."""
    ### BEGIN SOLUTION
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch * bytes_per_value
    ### END SOLUTION


# %% [markdown]
# A model of Llama 3 8B's shape has 32 layers and 32 query heads of size 128, and
# 8 K/V heads. For one text of 8192 tokens in bfloat16:

# %%
GiB = 2**30
shared = kv_cache_bytes(32, 8, 128, 8192)
every = kv_cache_bytes(32, 32, 128, 8192)
print(f"8 K/V heads: {shared / GiB:.0f} GiB; 32 K/V heads: {every / GiB:.0f} GiB")

# %% [markdown]
# A quarter of the cache, for the same number of query heads and the same weights
# in the query projection. A batch of 16 such texts would need 16 GiB of cache
# with shared heads, and 64 GiB without.

# %% test="test_kv_cache_bytes_llama" points=1
"""kv_cache_bytes is what a random Llama's cache measures."""
check.kv_cache_bytes_llama(kv_cache_bytes)

# %% test="test_kv_cache_bytes_random" points=1
"""kv_cache_bytes is right for other layers, heads, sizes, lengths and batches."""
### BEGIN HIDDEN TESTS
check.kv_cache_bytes_random(kv_cache_bytes, seed=1205)
### END HIDDEN TESTS

# %% [markdown] task="why_share_kv" points=2
# **Written answer.** Grouped-query attention keeps all H query heads and shares
# only K and V. Why share K and V rather than drop query heads? And what does a
# model give up when H_kv goes all the way down to 1?
#
# Write your answer in the cell below.
#
# === BEGIN MARK SCHEME ===
# **Model answer.** What grows with the text is the cache, and the cache holds
# only K and V: each query is used once, at its own step, and never kept. Sharing
# K/V heads divides the cache (and the memory read at every generated token) by
# H / H_kv, while every query head still asks its own question of the keys, so
# the heads can still attend differently. With H_kv = 1 (multi-query) all heads
# must find what they need in one set of keys and values: the heads lose
# diversity, and quality drops somewhat; a few K/V groups keep most of it.
#
# **Rubric (2 points).**
#
# * 1 point: the cache holds K and V, not queries (queries are used once); sharing
#   them divides the cache and the memory traffic by the group size, while the
#   query heads keep asking different questions.
# * 1 point: with one K/V head every head reads the same keys and values: less
#   diversity between heads, some quality lost (grouped query attention keeps most
#   of it).
# === END MARK SCHEME ===

# %% [markdown] open=true
# YOUR ANSWER HERE
