# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · Heads as a tensor dimension
#
# In 03 you projected one head at a time. BERT projects all heads at once with
# the fused layer — (B, T, D) — and then **splits** the last dimension into H
# blocks of d, making the head a dimension of its own: (B, H, T, d). Then every
# head's attention is one batched matrix product.
#
# Two steps, and the order matters:
#
# 1. `view(B, T, H, d)` — split the last dim into (H, d). Head h is the block
#    `h*d:(h+1)*d` of the features, so H comes first, d second.
# 2. `transpose(1, 2)` — swap T and H, giving (B, H, T, d).
#
# Why not `view(B, H, T, d)` directly? A view only reinterprets the memory in
# order, so it would cut the (T·D) numbers of one text into H chunks of T·d
# *consecutive* numbers: chunk 0 would be the first T/H tokens' full vectors, not
# head 0 of every token. The shapes look right and the numbers are garbage.

# %%
import torch

from course import data, models
from course.checks import split as check

model, tokenizer = models.load()
H = model.config.num_attention_heads

# %% [markdown]
# A small picture makes the difference visible: B=1, T=2 tokens, H=2 heads, d=3.
# Token t's features are numbered `t0 t1 t2 | t3 t4 t5` (head 0 | head 1).

# %%
x = torch.arange(12.0).view(1, 2, 6)  # token 0: 0..5, token 1: 6..11
print(
    "right: view(1, 2, 2, 3).transpose(1, 2) ->\n", x.view(1, 2, 2, 3).transpose(1, 2)
)
print(
    "wrong: view(1, 2, 2, 3) without transpose, read as (B, H, T, d) ->\n",
    x.view(1, 2, 2, 3),
)

# %% [markdown]
# In the right version, head 0 holds `0 1 2` (token 0) and `6 7 8` (token 1):
# the first d features of every token. In the wrong one "head 0" is token 0's
# whole vector.
#
# **Exercise 1.** Write `split_heads(x, num_heads)`: (B, T, D) → (B, H, T, d).


# %% answer="split_heads"
def split_heads(x, num_heads):
    """(B, T, D) -> (B, H, T, d)."""
    ### BEGIN SOLUTION
    B, T, D = x.shape
    return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)
    ### END SOLUTION


# %%
enc = tokenizer(data.SAMPLE_TEXT, return_tensors="pt")
with torch.no_grad():
    hidden = model(**enc).hidden_states[0]  # (1, T, D)
    q = model.encoder.layer[0].attention.self.query(hidden)  # (1, T, D)
print(tuple(q.shape), "->", tuple(split_heads(q, H).shape))

# %% test="test_split_heads_shape" points=1
"""split_heads gives (B, H, T, d)."""
check.split_heads_shape(split_heads)

# %% test="test_split_heads_bertviz" points=1
"""split_heads of layer 0's queries equals bertviz's neuron-view queries."""
check.split_heads_bertviz(split_heads)

# %% test="test_split_heads_random" points=2
"""split_heads is right for other batches, lengths, head counts and sizes."""
### BEGIN HIDDEN TESTS
check.split_heads_random(split_heads, seed=401)
### END HIDDEN TESTS

# %% [markdown]
# ## Merging the heads back
#
# After attention, each head has a context of (B, H, T, d); the output dense layer
# wants (B, T, D) with the heads side by side again. Undo the two steps in
# reverse order: transpose back to (B, T, H, d), then flatten (H, d) into D.
#
# A transpose does not move memory, it only changes strides, so the result is
# not contiguous and `.view` refuses it: call `.contiguous()` first, or use
# `.reshape`, which copies when it has to.
#
# **Exercise 2.** Write `merge_heads(x)`: (B, H, T, d) → (B, T, D).


# %% answer="merge_heads"
def merge_heads(x):
    """(B, H, T, d) -> (B, T, H*d)."""
    ### BEGIN SOLUTION
    B, H, T, d = x.shape
    return x.transpose(1, 2).contiguous().view(B, T, H * d)
    ### END SOLUTION


# %%
print(torch.equal(merge_heads(split_heads(q, H)), q))

# %% test="test_merge_heads_shape" points=1
"""merge_heads gives (B, T, D)."""
check.merge_heads_shape(merge_heads)

# %% test="test_merge_heads_values" points=1
"""merge_heads of bertviz's queries gives back the query layer's output."""
check.merge_heads_values(merge_heads)

# %% test="test_merge_heads_random" points=2
"""merge_heads is right for other shapes (inputs laid out like probs @ V)."""
### BEGIN HIDDEN TESTS
check.merge_heads_random(merge_heads, seed=402)
### END HIDDEN TESTS
