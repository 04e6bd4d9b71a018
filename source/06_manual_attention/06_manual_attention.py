# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 06 · Attention by hand: one head, then all heads
#
# You now have every piece: the head's slice of Q, K and V (03), heads as a
# dimension (04), scaled scores and the softmax over the keys (05). Put them
# together and match BERT's own numbers:
#
# 1. Q, K, V = query(x), key(x), value(x), each (B, T, D), split into heads;
# 2. scores = Q Kᵀ / √d, (B, H, T, T), plus the **mask** (below);
# 3. probs = softmax(scores) over the keys;
# 4. context = probs @ V, (B, H, T, d), merged back to (B, T, D).
#
# With the course model D = 384, H = 12, d = 32; bert-base has 768, 12, 64.

# %%
import math

import matplotlib.pyplot as plt
import torch

from course import data, models
from course.checks import attention as check

model, tokenizer = models.load()
self_attn = model.encoder.layer[0].attention.self
enc = tokenizer(data.SAMPLE_TEXT, return_tensors="pt")
with torch.no_grad():
    out = model(**enc)
hidden = out.hidden_states[0]  # (1, T, D): the input of layer 0
print(tuple(hidden.shape), self_attn.num_attention_heads, "heads")

# %% [markdown]
# ## 1. Padding and the mask
#
# In a batch, short texts are padded (02). Padded positions must not be
# attended to: their **key** columns must get weight 0. BERT does that by adding
# a large negative number to the scores of padded keys before the softmax, and 0
# everywhere else. The tokenizer's mask is (B, T) of 1 (token) and 0 (pad); the
# additive mask was `(1 - mask) * -10000` in the original BERT (`exp(-10000)` is
# 0) and is `(1 - mask) * torch.finfo(dtype).min` in current transformers (the
# most negative number the dtype holds). The original BERT shaped it (B, 1, 1, T),
# which broadcasts over heads and queries; current transformers spreads it over
# the queries itself and hands each layer (B, 1, T, T). Here you build the
# (B, 1, 1, T) form.
#
# Adding it with the wrong sign gives padded keys *all* the weight; multiplying
# the scores by the mask gives padded keys a score of 0, which still gets weight.
#
# **Exercise 1.** Write `extended_mask(attention_mask, dtype)`: (B, T) of 1/0 →
# (B, 1, 1, T) of `dtype`, 0 at tokens and a large negative number (−10000 or
# `torch.finfo(dtype).min`) at padding.


# %% answer="extended_mask"
def extended_mask(attention_mask, dtype):
    """Additive attention mask (B, 1, 1, T): 0 at tokens, very negative at padding."""
    ### BEGIN SOLUTION
    mask = attention_mask[:, None, None, :].to(dtype)  # (B, 1, 1, T)
    return (1.0 - mask) * torch.finfo(dtype).min
    ### END SOLUTION


# %%
batch = tokenizer([data.SAMPLE_TEXT, "A short one."], padding=True, return_tensors="pt")
print(batch["attention_mask"])
print(extended_mask(batch["attention_mask"], torch.float32)[1, 0, 0])

# %% test="test_extended_mask_shape" points=1
"""extended_mask has shape (B, 1, 1, T)."""
check.extended_mask_shape(extended_mask)

# %% test="test_extended_mask_values" points=1
"""extended_mask is 0 at tokens and very negative at padding, in the dtype asked for."""
check.extended_mask_values(extended_mask)

# %% test="test_extended_mask_random" points=1
"""extended_mask is right for random masks and dtypes."""
### BEGIN HIDDEN TESTS
check.extended_mask_random(extended_mask, seed=601)
### END HIDDEN TESTS

# %% [markdown]
# ## 2. One head
#
# **Exercise 2.** Write `head_attention(hidden, self_attn, head,
# attention_mask=None)` returning `(probs, context)`: that head's attention
# probabilities (B, T, T) and its context (B, T, d). Use `self_attn.query`,
# `.key`, `.value` (nn.Linear modules); `self_attn` itself is turned off in the
# tests. `attention_mask` is the tokenizer's (B, T) mask, or None.
#
# The head size is stored on the module: `self_attn.attention_head_size` (d), as
# is `self_attn.num_attention_heads` (H). Head h owns rows `h*d : (h+1)*d` of each
# weight (03). For one head the scores are (B, T, T), with no head dim, so the
# mask must be (B, 1, T): the 1 broadcasts over the queries (every query sees the
# same padded keys) and T runs over the keys. `extended_mask(...)[:, 0]` is that.


# %% answer="head_attention"
def head_attention(hidden, self_attn, head, attention_mask=None):
    """One head's attention: probs (B, T, T) and context (B, T, d)."""
    ### BEGIN SOLUTION
    d = self_attn.attention_head_size
    rows = slice(head * d, (head + 1) * d)

    def project(linear):
        return hidden @ linear.weight[rows].T + linear.bias[rows]  # (B, T, d)

    q, k, v = project(self_attn.query), project(self_attn.key), project(self_attn.value)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)  # (B, T, T)
    if attention_mask is not None:
        scores = scores + extended_mask(attention_mask, scores.dtype)[:, 0]  # (B, 1, T)
    probs = torch.softmax(scores, dim=-1)
    return probs, probs @ v
    ### END SOLUTION


# %%
with torch.no_grad():
    probs, context = head_attention(hidden, self_attn, 0)
print(tuple(probs.shape), tuple(context.shape))
print(
    "largest difference to the model:",
    (probs - out.attentions[0][:, 0]).abs().max().item(),
)

# %% [markdown]
# **The same head in einsum.** `torch.einsum` names every index, which makes the
# shapes of attention explicit: b batch, q query, k key, f feature (one of the d
# features of a head). The scores contract f, the context contracts k:
#
# $$S_{bqk} = \tfrac{1}{\sqrt{d}}\sum_f Q_{bqf}K_{bkf}, \qquad
#   C_{bqf} = \sum_k P_{bqk}V_{bkf}.$$
#
# `@` and einsum are the same computation; use whichever you read more easily
# (both are accepted everywhere in this course).

# %%
d = self_attn.attention_head_size
with torch.no_grad():
    q = hidden @ self_attn.query.weight[:d].T + self_attn.query.bias[:d]  # (B, T, d)
    k = hidden @ self_attn.key.weight[:d].T + self_attn.key.bias[:d]
    v = hidden @ self_attn.value.weight[:d].T + self_attn.value.bias[:d]
    p = torch.einsum("bqf,bkf->bqk", q, k).div(math.sqrt(d)).softmax(-1)
    c = torch.einsum("bqk,bkf->bqf", p, v)
print(
    "einsum vs your head_attention:",
    (p - probs).abs().max().item(),
    (c - context).abs().max().item(),
)

# %% test="test_head_attention_shapes" points=1
"""head_attention returns probs (B, T, T) and context (B, T, d)."""
check.head_attention_shapes(head_attention)

# %% test="test_head_attention_probs" points=1
"""probs of heads 0 and 7 equal the model's attentions."""
check.head_attention_probs(head_attention)

# %% test="test_head_attention_context" points=1
"""context of heads 0 and 7 equals the attention module's output."""
check.head_attention_context(head_attention)

# %% test="test_head_attention_mask" points=1
"""In a padded batch, padded keys get zero weight and the numbers match."""
check.head_attention_mask(head_attention)

# %% test="test_head_attention_random" points=2
"""head_attention is right for other models, layers, heads, batches and padding."""
### BEGIN HIDDEN TESTS
check.head_attention_random(head_attention, seed=602)
### END HIDDEN TESTS

# %% [markdown]
# **Exercise 3.** Set `attention_first_head_first_layer` to layer 0, head 0's
# attention matrix on the sample text, (T, T). Your `head_attention` returns
# probs of (B, T, T): drop the batch dimension (the batch holds one text). Call
# it inside `with torch.no_grad():`, because without it the matrix still requires
# grad and the plot below fails: matplotlib cannot turn it into an array.

# %% answer="first_head_attention"
### BEGIN SOLUTION
with torch.no_grad():
    attention_first_head_first_layer = head_attention(hidden, self_attn, 0)[0][0]
### END SOLUTION

# %%
tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
fig, ax = plt.subplots(figsize=(5, 5))
ax.imshow(attention_first_head_first_layer, cmap="viridis")
ax.set_xticks(range(len(tokens)), tokens, rotation=90)
ax.set_yticks(range(len(tokens)), tokens)
ax.set(xlabel="key", ylabel="query", title="layer 0, head 0")
plt.show()

# %% test="test_first_head_attention_rows" points=1
"""attention_first_head_first_layer is (T, T) and its rows sum to 1."""
check.first_head_attention_rows(attention_first_head_first_layer)

# %% test="test_first_head_attention_values" points=1
"""attention_first_head_first_layer equals the model's attentions[0][0, 0]."""
check.first_head_attention_values(attention_first_head_first_layer)

# %% [markdown]
# ## 3. All heads at once
#
# One batched matrix product does every head: split Q, K, V into (B, H, T, d),
# compute (B, H, T, T) scores, add the (B, 1, 1, T) mask, softmax, multiply by V,
# and merge the heads back into (B, T, D) — transpose first (04).
#
# **Exercise 4.** Write `multi_head_attention(hidden, self_attn,
# attention_mask=None)` returning `(probs (B, H, T, T), context (B, T, D))`.
# 04's `split_heads` and `merge_heads` are not defined in this notebook (each
# notebook runs in a kernel of its own): write the two reshapes again inside
# your function, or copy your 04 helpers into the answer cell.


# %% answer="multi_head_attention"
def multi_head_attention(hidden, self_attn, attention_mask=None):
    """All heads: probs (B, H, T, T) and merged context (B, T, D)."""
    ### BEGIN SOLUTION
    B, T, D = hidden.shape
    H = self_attn.num_attention_heads
    d = D // H

    def split(linear):
        return linear(hidden).view(B, T, H, d).transpose(1, 2)  # (B, H, T, d)

    q, k, v = split(self_attn.query), split(self_attn.key), split(self_attn.value)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)  # (B, H, T, T)
    if attention_mask is not None:
        scores = scores + extended_mask(attention_mask, scores.dtype)
    probs = torch.softmax(scores, dim=-1)
    context = (probs @ v).transpose(1, 2).reshape(B, T, D)
    return probs, context
    ### END SOLUTION


# %%
with torch.no_grad():
    probs, context = multi_head_attention(
        batch_hidden := model(**batch).hidden_states[0],
        self_attn,
        batch["attention_mask"],
    )
print(tuple(probs.shape), tuple(context.shape))
print(
    "weight on padded keys of text 2:",
    probs[1, :, :, batch["attention_mask"][1] == 0].sum().item(),
)

# %% test="test_multi_head_attention_probs" points=1
"""probs equal the model's attentions for layer 0."""
check.multi_head_attention_probs(multi_head_attention)

# %% test="test_multi_head_attention_context" points=1
"""context equals the attention module's output for layer 0."""
check.multi_head_attention_context(multi_head_attention)

# %% test="test_multi_head_attention_mask" points=1
"""In a padded batch, probs and context equal the model's."""
check.multi_head_attention_mask(multi_head_attention)

# %% test="test_multi_head_attention_random" points=2
"""multi_head_attention is right for other models, layers, batches and padding."""
### BEGIN HIDDEN TESTS
check.multi_head_attention_random(multi_head_attention, seed=603)
### END HIDDEN TESTS
