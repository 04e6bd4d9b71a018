# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · Softmax and scaling: which dim, and why divide
#
# Attention turns scores into weights: for each **query** token, a probability
# distribution over the **key** tokens,
#
# $$\text{weights} = \operatorname{softmax}\!\left(\frac{QK^\top}{\sqrt{d}}\right),$$
#
# with Q of shape (..., Tq, d), K of shape (..., Tk, d) and scores of shape
# (..., Tq, Tk): row i holds query i's score against every key. Two choices in
# that formula are easy to get wrong: the dimension of the softmax, and the
# $\sqrt{d}$.

# %%
import math

import matplotlib.pyplot as plt
import torch

from course import data, models
from course.checks import softmax as check

model, tokenizer = models.load()
enc = tokenizer(data.SAMPLE_TEXT, return_tensors="pt")
tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
with torch.no_grad():
    out = model(**enc)
Q, K = check.sample_qk()  # layer 0's queries and keys, (1, H, T, d), from bertviz
print(tokens)
print("Q", tuple(Q.shape), "K", tuple(K.shape))

# %% [markdown]
# ## 1. Softmax by hand, and numerically stable
#
# $\operatorname{softmax}(x)_j = e^{x_j} / \sum_k e^{x_k}$ along one dim. In float32
# $e^{89}$ is already `inf`, and `inf / inf` is NaN — scores of a few hundred are
# enough to break the naive formula:

# %%
big = torch.tensor([1000.0, 999.0, 0.0])
print("naive:", big.exp() / big.exp().sum())

# %% [markdown]
# The fix: softmax does not change when you subtract the same number from every
# entry ($e^{x_j - m} / \sum_k e^{x_k - m}$, the $e^{-m}$ cancels). Subtract the
# **max** along the dim: the largest exponent is then $e^0 = 1$, nothing overflows.
#
# **Exercise 1.** Write `softmax(scores, dim=-1)` by hand (exp, sum, max; no
# `torch.softmax`, `F.softmax` or `nn.Softmax` — they are turned off in the tests),
# numerically stable for very large scores.


# %% answer="softmax"
def softmax(scores, dim=-1):
    """Numerically stable softmax along `dim`, by hand."""
    ### BEGIN SOLUTION
    shifted = scores - scores.amax(dim=dim, keepdim=True)
    e = shifted.exp()
    return e / e.sum(dim=dim, keepdim=True)
    ### END SOLUTION


# %%
print(softmax(big))

# %% test="test_softmax_rows" points=1
"""softmax over the last dim equals torch.softmax."""
check.softmax_rows(softmax)

# %% test="test_softmax_stable" points=1
"""softmax stays finite and right on scores of 1e4."""
check.softmax_stable(softmax)

# %% test="test_softmax_random" points=2
"""softmax is right along any dim, in float32 and float64."""
### BEGIN HIDDEN TESTS
check.softmax_random(softmax, seed=501)
### END HIDDEN TESTS

# %% [markdown]
# ## 2. Scores, scaled
#
# **Exercise 2.** Write `attention_scores(Q, K)` returning $QK^\top/\sqrt{d}$ with
# d = Q's last dim: (..., Tq, d) and (..., Tk, d) give (..., Tq, Tk).


# %% answer="attention_scores"
def attention_scores(Q, K):
    """Scaled dot products of every query with every key: (..., Tq, Tk)."""
    ### BEGIN SOLUTION
    return Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    ### END SOLUTION


# %%
print(tuple(attention_scores(Q, K).shape))

# %% test="test_attention_scores_shape" points=1
"""attention_scores gives (..., Tq, Tk), also when Tq != Tk."""
check.attention_scores_shape(attention_scores)

# %% test="test_attention_scores_values" points=1
"""attention_scores on layer 0's queries and keys of the sample text."""
check.attention_scores_values(attention_scores)

# %% test="test_attention_scores_random" points=2
"""attention_scores is right for other shapes and head sizes."""
### BEGIN HIDDEN TESTS
check.attention_scores_random(attention_scores, seed=502)
### END HIDDEN TESTS

# %% [markdown]
# ## 3. Which dim? The "bank" example
#
# Row i of the weights answers "where does token i look?" — it must be a
# distribution over the keys, so the softmax runs over the **last** dim (-1). A
# softmax over the query dim (-2) would instead make each *key* column sum to 1:
# "how is key j shared among the queries", which is not what attention mixes.
# For one (T, T) matrix dim -2 is dim 0; on (B, H, T, T) scores dim 0 is the
# batch, a third wrong answer.
#
# Our sample text has "bank" twice, in two meanings. Look at where each "bank"
# looks in head 0 of layer 0, with softmax over the right and the wrong dim:

# %%
s = attention_scores(Q, K)[0, 0]  # (T, T), head 0
right, wrong = torch.softmax(s, dim=-1), torch.softmax(s, dim=0)
banks = [i for i, t in enumerate(tokens) if t == "bank"]
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
for ax, w, title in [
    (axes[0], right, "softmax(dim=-1): rows sum to 1"),
    (axes[1], wrong, "softmax(dim=0): columns sum to 1"),
]:
    ax.imshow(w, cmap="viridis")
    ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=7)
    ax.set_yticks(range(len(tokens)), tokens, fontsize=7)
    ax.set_title(title)
plt.show()
print("row sums, dim=-1:", right.sum(-1)[banks])
print("row sums, dim=0: ", wrong.sum(-1)[banks])

# %% [markdown]
# **Exercise 3.** Write `attention_weights(Q, K)`: each query's distribution over
# the keys, (..., Tq, Tk). You may use your `softmax` or `torch.softmax` here.


# %% answer="attention_weights"
def attention_weights(Q, K):
    """Softmax of the scaled scores over the keys: (..., Tq, Tk)."""
    ### BEGIN SOLUTION
    return softmax(attention_scores(Q, K), dim=-1)
    ### END SOLUTION


# %% test="test_attention_weights_rows" points=1
"""Each query's weights over the keys sum to 1."""
check.attention_weights_rows(attention_weights)

# %% test="test_attention_weights_values" points=1
"""attention_weights equals the model's own attentions for layer 0."""
check.attention_weights_values(attention_weights)

# %% test="test_attention_weights_random" points=2
"""attention_weights is right for other shapes and head sizes."""
### BEGIN HIDDEN TESTS
check.attention_weights_random(attention_weights, seed=503)
### END HIDDEN TESTS

# %% [markdown] task="why_last_dim" points=2
# **Written answer.** Why does the softmax run over the last dim (the keys)?
# Use the bank example: what does one row of the weights say about one "bank",
# and what would the wrong dim say instead?
#
# Write your answer in the cell below.
#
# === BEGIN MARK SCHEME ===
# **Model answer.** One row of the scores is one query against every key. The
# softmax over the last dim makes each row a distribution over the keys (it sums to
# 1): the row of "bank" says how much of each token's value goes into the new
# vector of "bank", a weighted average (in layer 0, head 0 the two rows of "bank"
# are still nearly the same: this early the two meanings are not told apart yet).
# Over dim 0 each *key's column* is normalised across queries: the
# numbers say how one key is shared among the queries, the row of "bank" no longer
# sums to 1 (the printed row sums), and its output is no average of values.
#
# **Rubric (2 points).**
#
# * 1 point: the last dim is the keys; each query's row ("bank") becomes weights over
#   the keys that sum to 1, the weights of an average of the values.
# * 1 point: the wrong dim normalises over queries (how one key is shared among
#   queries); the row of "bank" no longer sums to 1 and says nothing about what "bank"
#   draws from.
# === END MARK SCHEME ===

# %% [markdown] open=true
# YOUR ANSWER HERE

# %% [markdown]
# ## 4. Why divide by √d
#
# For q and k with independent unit-normal entries, $q\cdot k = \sum_{i=1}^{d} q_i k_i$
# is a sum of d terms of variance 1, so its variance is d and its standard
# deviation $\sqrt{d}$. With d = 64 typical scores are ±8 and more; the softmax of
# such scores is nearly one-hot and its gradient nearly zero. Dividing by
# $\sqrt{d}$ brings the standard deviation back to 1, whatever the head size.
#
# **Exercise 4.** Write `dot_product_std(d_k, n_samples, seed)`: draw `n_samples`
# pairs of unit-normal vectors q, k of size d_k (seeded, so the same seed gives
# the same numbers) and return `(unscaled_std, scaled_std)`: the standard
# deviation of q·k and of q·k / √d_k, as floats.


# %% answer="dot_product_std"
def dot_product_std(d_k, n_samples, seed):
    """Empirical std of q·k before and after dividing by sqrt(d_k)."""
    ### BEGIN SOLUTION
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(n_samples, d_k, generator=gen)
    k = torch.randn(n_samples, d_k, generator=gen)
    dots = (q * k).sum(-1)
    return dots.std().item(), (dots / math.sqrt(d_k)).std().item()
    ### END SOLUTION


# %%
for d_k in (1, 16, 64, 256):
    unscaled, scaled = dot_product_std(d_k, 20000, 0)
    print(
        f"d_k={d_k:>3}: std of q.k {unscaled:6.2f}, / sqrt(d_k) {scaled:.2f}"
        f", divided by d_k {unscaled / d_k:.3f}"
    )

# %% [markdown]
# Dividing by d_k overshoots: the std becomes $1/\sqrt{d_k}$, so scores shrink as
# heads widen, and the softmax of near-equal scores is nearly uniform. Here are
# the three choices on one row of 8 scores with d_k = 64:

# %%
gen = torch.Generator().manual_seed(0)
dots = (torch.randn(8, 64, generator=gen) * torch.randn(8, 64, generator=gen)).sum(-1)
for label, s in [
    ("no scaling", dots),
    ("divided by sqrt(d_k)", dots / 8),
    ("divided by d_k", dots / 64),
]:
    print(torch.softmax(s, -1).numpy().round(3), label)

# %% test="test_dot_product_std_values" points=1
"""dot_product_std(64, 20000, 0) is about (8, 1)."""
check.dot_product_std_values(dot_product_std)

# %% test="test_dot_product_std_random" points=1
"""dot_product_std is right for other head sizes and reproducible per seed."""
### BEGIN HIDDEN TESTS
check.dot_product_std_random(dot_product_std, seed=504)
### END HIDDEN TESTS

# %% [markdown] task="why_sqrt_dk" points=2
# **Written answer.** Why divide the scores by √d_k and not by d_k or not at all?
# Use your numbers above and say what happens to the softmax in each case.
#
# Write your answer in the cell below.
#
# === BEGIN MARK SCHEME ===
# **Model answer.** For unit-normal q and k, q·k is a sum of d_k products of
# variance 1, so its standard deviation is √d_k (the unscaled std above is about
# √d_k, the scaled one about 1). Unscaled, the scores grow with d_k, the softmax
# saturates (almost one-hot) and its gradients vanish. Dividing by √d_k keeps the
# std about 1 for any head size, so the softmax stays soft. Dividing by d_k
# over-corrects: the std becomes 1/√d_k, the scores shrink towards 0 and the
# softmax towards uniform, so a query can hardly prefer any key.
#
# **Rubric (2 points).**
#
# * 1 point: the std of q·k grows as √d_k (with the measured numbers), and dividing by
#   √d_k brings it to about 1 whatever d_k.
# * 1 point: the effect on the softmax: not scaled, saturated (nearly one-hot,
#   vanishing gradients); divided by d_k, scores near 0 and weights nearly uniform.
# === END MARK SCHEME ===

# %% [markdown] open=true
# YOUR ANSWER HERE
