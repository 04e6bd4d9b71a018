# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 08 · Positions and masks
#
# Attention compares every query with every key, and nothing in
# softmax(QKᵀ/√d)V depends on *where* a token stands: shuffle the tokens and the
# outputs shuffle the same way. "dog bites man" and "man bites dog" would look
# alike. Transformers fix this by adding a **position vector** to each token's
# embedding: the original Transformer used fixed sinusoids; BERT learns a table
# (`position_embeddings`, one row per position, 01).
#
# Masks are the other way to shape what attention sees: padding masks (06) hide
# pad tokens; a **causal** mask hides the future, so that token i only attends to
# tokens 0..i — what a language model that predicts the next word needs.

# %%
import math

import matplotlib.pyplot as plt
import torch

from course import models
from course.checks import positions as check

model, tokenizer = models.load()

# %% [markdown]
# ## 1. Sinusoidal encodings
#
# For position p and column pair (2i, 2i+1) of a d_model-wide vector:
#
# $$PE[p, 2i] = \sin\!\big(p \cdot 10000^{-2i/d}\big),\qquad PE[p, 2i+1] = \cos\!\big(p \cdot 10000^{-2i/d}\big).$$
#
# Each pair of columns is a clock turning at its own speed: the first pairs turn
# fast (they tell neighbours apart), the last ones slowly (they tell far-apart
# positions apart). Because sin and cos of a shifted angle are a rotation of the
# unshifted ones, PE[p + k] is a linear function of PE[p]: relative offsets are
# easy for attention to read.
#
# **Exercise 1.** Write `sinusoidal_encoding(max_len, d_model)` returning the
# (max_len, d_model) table (for odd d_model the last column is a sin).


# %% answer="sinusoidal_encoding"
def sinusoidal_encoding(max_len, d_model):
    """Sinusoidal position encodings, (max_len, d_model)."""
    ### BEGIN SOLUTION
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (ceil(d/2),)
    angle = pos / 10000 ** (two_i / d_model)  # (max_len, ceil(d/2))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe
    ### END SOLUTION


# %%
pe = sinusoidal_encoding(128, model.config.hidden_size)
learned = model.embeddings.position_embeddings.weight[:128].detach()


def cosine_similarity_matrix(x):
    x = x / x.norm(dim=-1, keepdim=True)
    return x @ x.T


fig, axes = plt.subplots(1, 3, figsize=(15, 4))
axes[0].imshow(pe.T, aspect="auto", cmap="RdBu")
axes[0].set(
    title="sinusoidal PE (columns x positions)", xlabel="position", ylabel="column"
)
axes[1].imshow(cosine_similarity_matrix(pe), cmap="viridis")
axes[1].set(
    title="similarity of sinusoidal positions", xlabel="position", ylabel="position"
)
axes[2].imshow(cosine_similarity_matrix(learned), cmap="viridis")
axes[2].set(
    title="similarity of BERT's learned positions", xlabel="position", ylabel="position"
)
plt.show()

# %% [markdown]
# Both similarity maps have a bright diagonal band: nearby positions get similar
# vectors. The sinusoids were designed that way; BERT *learned* it from data.

# %% test="test_sinusoidal_encoding_shape" points=1
"""sinusoidal_encoding(50, 16) is (50, 16) and position 0 is [0, 1, 0, 1, ...]."""
check.sinusoidal_shape(sinusoidal_encoding)

# %% test="test_sinusoidal_encoding_values" points=1
"""sinusoidal_encoding(50, 16) follows the formula."""
check.sinusoidal_values(sinusoidal_encoding)

# %% test="test_sinusoidal_encoding_random" points=2
"""sinusoidal_encoding is right for other lengths and widths, odd ones too."""
### BEGIN HIDDEN TESTS
check.sinusoidal_random(sinusoidal_encoding, seed=801)
### END HIDDEN TESTS

# %% [markdown]
# ## 2. The causal mask
#
# **Exercise 2.** Write `causal_mask(T)`: a bool (T, T) tensor, True where query i
# may attend key j — that is, j ≤ i (the lower triangle, diagonal included).


# %% answer="causal_mask"
def causal_mask(T):
    """Bool (T, T): True where query i may attend key j (j <= i)."""
    ### BEGIN SOLUTION
    return torch.ones(T, T, dtype=torch.bool).tril()
    ### END SOLUTION


# %%
causal_mask(5)

# %% test="test_causal_mask_small" points=1
"""causal_mask(4) is the lower triangle of True, as a bool tensor."""
check.causal_mask_small(causal_mask)

# %% test="test_causal_mask_random" points=1
"""causal_mask is right for other lengths."""
### BEGIN HIDDEN TESTS
check.causal_mask_random(causal_mask, seed=802)
### END HIDDEN TESTS

# %% [markdown]
# **Exercise 3.** Write `causal_attention(Q, K, V)` returning `(probs, context)`
# for Q, K, V of shape (..., T, d): scaled scores, future keys masked with −∞
# **before** the softmax, softmax over the keys, then probs @ V. torch's fused
# attention is turned off in the tests.


# %% answer="causal_attention"
def causal_attention(Q, K, V):
    """Causal scaled dot-product attention: probs (..., T, T), context (..., T, d)."""
    ### BEGIN SOLUTION
    T = Q.shape[-2]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])  # (..., T, T)
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    return probs, probs @ V
    ### END SOLUTION


# %%
q = k = v = torch.randn(1, 5, 4)
print(causal_attention(q, k, v)[0][0])

# %% test="test_causal_attention_probs" points=1
"""probs equal torch's causal attention weights."""
check.causal_attention_probs(causal_attention)

# %% test="test_causal_attention_context" points=1
"""context equals torch's causal attention output."""
check.causal_attention_context(causal_attention)

# %% test="test_causal_attention_random" points=2
"""causal_attention is right for other shapes."""
### BEGIN HIDDEN TESTS
check.causal_attention_random(causal_attention, seed=803)
### END HIDDEN TESTS

# %% [markdown]
# ## 3. Attention cannot see order
#
# Take one BERT layer and feed it hidden vectors **without** position
# information. Permute the tokens: if the layer cannot see order, its output is
# the original output permuted the same way: `layer(x[:, perm]) ≈
# layer(x)[:, perm]`. Compare with a tolerance — reordering tokens reorders the
# float sums inside the softmax and the matrix products. Use
# `torch.allclose(a, b, atol=1e-5, rtol=1e-4)`: in float32 the reordered sums
# differ by up to about 5e-7, and `torch.allclose`'s defaults (`atol=1e-8`,
# `rtol=1e-5`) are too tight for outputs near zero. The tests run most of their
# layers in float64, where the rounding is far below either tolerance, and one in
# float32, where the tolerance above must still say True; a layer that sees order
# changes its output by far more than either.
#
# **Exercise 4.** Write `permutation_check(layer, hidden, perm)` returning a
# Python bool: whether `layer` (called as `layer(hidden)`, returning (B, T, D)) is
# permutation-equivariant on `hidden` (B, T, D) for the token permutation `perm`.


# %% answer="permutation_check"
def permutation_check(layer, hidden, perm):
    """True if layer(hidden[:, perm]) equals layer(hidden)[:, perm] (float tolerance)."""
    ### BEGIN SOLUTION
    with torch.no_grad():
        permuted_in = layer(hidden[:, perm])
        permuted_out = layer(hidden)[:, perm]
    return bool(torch.allclose(permuted_in, permuted_out, atol=1e-5, rtol=1e-4))
    ### END SOLUTION


# %%
layer = model.encoder.layer[0]
x = torch.randn(1, 6, model.config.hidden_size)
perm = torch.tensor([5, 4, 3, 2, 1, 0])
print("BERT layer, no positions:", permutation_check(layer, x, perm))
print(
    "with sinusoids added:    ",
    permutation_check(
        lambda h: layer(h + sinusoidal_encoding(6, h.shape[-1])), x, perm
    ),
)

# %% test="test_permutation_check_bert" points=1
"""A BERT layer without positions: permutation_check is True."""
check.permutation_check_bert(permutation_check)

# %% test="test_permutation_check_positions" points=1
"""The same layer with positions added: permutation_check is False."""
check.permutation_check_positions(permutation_check)

# %% test="test_permutation_check_random" points=2
"""permutation_check is right for other layers, sizes, permutations, and float32."""
### BEGIN HIDDEN TESTS
check.permutation_check_random(permutation_check, seed=804)
### END HIDDEN TESTS

# %% [markdown] task="why_positions" points=2
# **Written answer.** Your permutation check says a BERT layer cannot see word
# order. How, then, does BERT tell "dog bites man" from "man bites dog"? Compare
# learned position embeddings with sinusoids: one advantage of each.
#
# Write your answer in the cell below.
#
# === BEGIN MARK SCHEME ===
# **Model answer.** The layers stay blind to order; the order enters with the
# input. BERT adds a learned position embedding (one vector per position) to each
# token's embedding before the first layer, so "dog" at position 1 and "dog" at
# position 3 are different vectors, and "dog bites man" and "man bites dog" give
# different inputs. Learned embeddings: free vectors fitted to the data, they learn
# whatever position information the task needs (but stop at
# `max_position_embeddings`, and rarely seen positions are poorly trained).
# Sinusoids: no parameters, defined for any length (also past the training length),
# and a fixed offset is a linear map (a rotation) of the encoding, so relative
# positions are easy to read.
#
# **Rubric (2 points).**
#
# * 1 point: positions enter the input: a position embedding added to each token
#   embedding, so the same word at another position is another vector (the layer
#   itself still cannot see order).
# * 1 point: one valid advantage of each (learned: fitted to the data and task;
#   sinusoids: no parameters, any length, offsets as linear maps). Both are needed for
#   the point.
# === END MARK SCHEME ===

# %% [markdown] open=true
# YOUR ANSWER HERE
