# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 11 · When attention goes wrong
#
# Five bugs that nearly every attention implementation meets once. None of them
# crashes; each one gives numbers that look fine until you check them. For each:
# the broken code and what it does, then your fix (graded), then a few sentences
# on how you would have found it (written, graded by your teacher).
#
# | bug | symptom | your fix |
# |---|---|---|
# | a query with nothing to attend | NaN, in float32 and float16 | `masked_softmax` |
# | the inverted mask | outputs change with the padding | `key_mask` |
# | `view` without `transpose` | right shapes, wrong numbers | `fixed_split_heads` |
# | no positions | the loss stops falling | `position_table` |
# | the (T, T) matrix | memory grows as T² | `chunked_attention` |

# %%
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from course import data, models
from course.checks import debugging as check

model, tokenizer = models.load()
config = model.config
H = config.num_attention_heads
d = config.hidden_size // H
print(f"{config.num_hidden_layers} layers, {H} heads of size {d}")

# %% [markdown]
# ## 1. NaN: a query with nothing to attend
#
# The usual masked softmax fills the blocked scores with -inf:


# %%
def broken_masked_softmax(scores, mask, dim=-1):
    """mask: bool, True = may attend."""
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=dim)


scores = torch.randn(3, 4)
mask = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0], [1, 0, 1, 1]], dtype=torch.bool)
print(broken_masked_softmax(scores, mask))

# %% [markdown]
# Row 1 may attend nothing, and $e^{-\infty} / \sum e^{-\infty} = 0/0$ is NaN. One
# NaN is enough: it flows through `probs @ V` into every later layer and into the
# loss. Such rows are not exotic: a causal mask combined with *left* padding
# blocks every key of the padded queries, and so does cross-attention to an
# empty memory.
#
# Filling with a large negative number instead hides the NaN but gives a row with
# nothing to attend a uniform spread over keys it must not see. In float16, -1e9
# is no such number: float16 stops at 65504, so -1e9 rounds to -inf. The additive
# form `(1 - mask) * -1e9` then gives -0 at the allowed keys and -inf at the
# blocked ones, the same as filling with -inf: right where a row has an allowed
# key, NaN where it has none (row 1 below). And `masked_fill(~mask, -1e9)` on
# float16 scores does not run at all: it raises `RuntimeError: value cannot be
# converted to type c10::Half without overflow`.

# %%
half = torch.randn(2, 4).half()
allowed = torch.tensor([[1, 1, 1, 0], [0, 0, 0, 0]])
additive = (1 - allowed).half() * -1e9
print(additive)
print(torch.softmax(half + additive, dim=-1))
try:
    half.masked_fill(allowed == 0, -1e9)
except RuntimeError as err:
    print("RuntimeError:", err)

# %% [markdown]
# **Exercise 1.** Write `masked_softmax(scores, mask, dim=-1)`: `mask` is bool,
# True = may attend, and broadcasts to `scores`. A row with no allowed position
# gives all zeros, never NaN; the result is finite and right for float16 and
# float32 scores of any size, and has the dtype of `scores`. (`torch.softmax` is
# allowed; `torch.finfo(scores.dtype).min` is the most negative finite number of
# a dtype.)


# %% answer="masked_softmax"
def masked_softmax(scores, mask, dim=-1):
    """Softmax over the allowed entries; rows with none allowed are all zeros."""
    ### BEGIN SOLUTION
    mask = torch.broadcast_to(mask, scores.shape)
    filled = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    probs = torch.softmax(filled.float(), dim=dim).to(scores.dtype)
    return probs.masked_fill(~mask.any(dim=dim, keepdim=True), 0.0)
    ### END SOLUTION


# %%
print(masked_softmax(scores, mask))
print(masked_softmax(half, allowed.bool()))

# %% test="test_masked_softmax_values" points=1
"""A padding mask, every query with something to attend: torch's softmax."""
check.masked_softmax_values(masked_softmax)

# %% test="test_masked_softmax_empty_rows" points=1
"""Queries with no allowed key get zeros, not NaN."""
check.masked_softmax_empty_rows(masked_softmax)

# %% test="test_masked_softmax_half" points=1
"""float16 scores up to 3e4 with empty rows: finite, right, still float16."""
check.masked_softmax_half(masked_softmax)

# %% test="test_masked_softmax_random" points=2
"""Other shapes, dims, dtypes and broadcast masks."""
### BEGIN HIDDEN TESTS
check.masked_softmax_random(masked_softmax, seed=1121)
### END HIDDEN TESTS

# %% [markdown] task="diagnose_nan" points=1
# **Diagnosis.** A model trains fine for an hour, then its loss is NaN. Which
# check would have found the cause (where would you look first), and why is a
# fill of -1e9 no fix in float16 (what do `(1 - mask) * -1e9` and
# `masked_fill(~mask, -1e9)` do there)?
#
# Write your answer in the cell below.
#
# === BEGIN MARK SCHEME ===
# **Model answer.** Look for the first non-finite value, not at the loss:
# `torch.autograd.set_detect_anomaly(True)`, or `torch.isfinite` asserted on each
# layer's attention weights (forward hooks). The first NaN is in a softmax row
# with no allowed key (a causal mask with left padding, an empty memory): 0/0. In
# float16, -1e9 is no large finite number: float16 stops at 65504, so -1e9 is -inf.
# `(1 - mask) * -1e9` gives -0 at allowed keys and -inf at blocked ones, the same as
# filling with -inf, so a row with no allowed key is still NaN; and
# `masked_fill(~mask, -1e9)` on float16 scores raises an overflow error. The fix:
# fill with `torch.finfo(dtype).min` and give rows with no allowed key zeros.
#
# **Rubric (1 point).**
#
# * 0.5 point: where to look: the first non-finite value (anomaly detection or
#   isfinite checks on the attention weights), a softmax row with no allowed key.
# * 0.5 point: float16: -1e9 becomes -inf (float16 max 65504), so the additive form
#   still gives NaN for fully masked rows, and masked_fill with -1e9 raises.
# === END MARK SCHEME ===

# %% [markdown] open=true
# YOUR ANSWER HERE

# %% [markdown]
# ## 2. The inverted mask
#
# The tokenizer's `attention_mask` is 1 at real tokens and 0 at padding. A key
# mask for `masked_softmax` is True where a query *may attend*. One `== 0` too
# many and the model attends only the padding:


# %%
def broken_key_mask(attention_mask):
    """(B, T) 0/1 -> (B, 1, 1, T) bool."""
    return attention_mask[:, None, None, :] == 0


def layer0_attention(enc, key_mask_fn):
    """Layer 0's attention, from the model's Q and K, with a key mask."""
    attn = model.encoder.layer[0].attention.self
    with torch.no_grad():
        x = model.embeddings(enc["input_ids"], token_type_ids=enc["token_type_ids"])
        B, T, D = x.shape
        q = attn.query(x).view(B, T, H, d).transpose(1, 2)  # (B, H, T, d)
        k = attn.key(x).view(B, T, H, d).transpose(1, 2)
        s = q @ k.transpose(-2, -1) / math.sqrt(d)  # (B, H, T, T)
    return masked_softmax(s, key_mask_fn(enc["attention_mask"]))


def show_row(enc, probs):
    """Where the short text's token 1 looks (head 0): its tokens or the padding."""
    real = enc["attention_mask"][1].bool()  # (T,) the short text's own tokens
    row = probs[1, 0, 1]  # (T,) over the keys
    print(
        f"padded to {real.numel()}: on its {int(real.sum())} tokens "
        f"{row[real].sum():.2f}, on the padding {row[~real].sum():.2f}, "
        f"largest weight {row.max():.3f}"
    )


texts = [data.SAMPLE_TEXT, "A short one."]
for pad_to in (16, 24):
    enc = tokenizer(texts, padding="max_length", max_length=pad_to, return_tensors="pt")
    show_row(enc, layer0_attention(enc, broken_key_mask))

# %% [markdown]
# The tell-tale sign: the short text's attention (and so its output) changes when
# only the amount of padding changes; here all of it goes to the padding, and its
# largest weight shrinks as the padding grows. A correct mask makes padding
# invisible.
#
# **Exercise 2.** Write `key_mask(attention_mask)`: (B, T) of 0/1 to a bool
# (B, 1, 1, T), True where a query may attend the key, so that it broadcasts over
# heads and queries.


# %% answer="key_mask"
def key_mask(attention_mask):
    """(B, T) 0/1 -> (B, 1, 1, T) bool, True = may attend."""
    ### BEGIN SOLUTION
    return attention_mask.bool()[:, None, None, :]
    ### END SOLUTION


# %%
for pad_to in (16, 24):
    enc = tokenizer(texts, padding="max_length", max_length=pad_to, return_tensors="pt")
    show_row(enc, layer0_attention(enc, key_mask))

# %% test="test_key_mask_values" points=1
"""On a padded batch of the course model: the model's own attentions."""
check.key_mask_values(key_mask)

# %% test="test_key_mask_random" points=1
"""Tiny BERTs of other sizes on padded random batches."""
### BEGIN HIDDEN TESTS
check.key_mask_random(key_mask, seed=1122)
### END HIDDEN TESTS

# %% [markdown] task="diagnose_mask" points=1
# **Diagnosis.** You have no reference model to compare with. Describe a test
# that catches an inverted (or missing) padding mask, and why it works.
#
# Write your answer in the cell below.
#
# === BEGIN MARK SCHEME ===
# **Model answer.** Padding must be invisible: run the same short text alone and
# padded to several lengths (or batched with a longer text) and compare the outputs
# at its real tokens; with a correct mask they are equal within float tolerance,
# and the attention weights on pad keys are 0. An inverted or missing mask lets the
# real tokens attend the pads, so their outputs change with the amount of padding
# (and an inverted one puts the weight on the pads). No reference is needed: the
# invariance is the specification.
#
# **Rubric (1 point).**
#
# * 0.5 point: the test: the same text with different amounts of padding, outputs at
#   the real tokens compared (or the attention on pad keys checked to be 0).
# * 0.5 point: why it works: a correct mask makes padding invisible; an inverted or
#   missing one makes the real tokens' outputs depend on the pads.
# === END MARK SCHEME ===

# %% [markdown] open=true
# YOUR ANSWER HERE

# %% [markdown]
# ## 3. `view` without `transpose`
#
# Splitting (B, T, D) into heads needs (B, H, T, d). This runs, and every shape
# downstream is right:


# %%
def broken_split_heads(x, num_heads):
    B, T, D = x.shape
    return x.view(B, num_heads, T, D // num_heads)


enc = tokenizer(texts, padding=True, return_tensors="pt")
with torch.no_grad():
    out = model(**enc, output_attentions=True)
    x = model.embeddings(enc["input_ids"], token_type_ids=enc["token_type_ids"])
    attn = model.encoder.layer[0].attention.self
    q, k = broken_split_heads(attn.query(x), H), broken_split_heads(attn.key(x), H)
probs = masked_softmax(
    q @ k.transpose(-2, -1) / math.sqrt(d), key_mask(enc["attention_mask"])
)
print("shapes:", tuple(probs.shape), tuple(out.attentions[0].shape))
print(
    "largest difference from the model:", (probs - out.attentions[0]).abs().max().item()
)

# %% [markdown]
# `view` only re-reads the same memory with new strides. Memory holds token 0's D
# features, then token 1's, ...; `view(B, H, T, d)` calls the first T·d numbers
# "head 0", so head 0 gets all heads' features of the first T/H tokens. The
# features of one token for one head are d *consecutive* numbers: view as
# (B, T, H, d), then swap T and H.
#
# **Exercise 3.** Write `fixed_split_heads(x, num_heads)`: (B, T, D) to
# (B, H, T, d) with the right heads.


# %% answer="fixed_split_heads"
def fixed_split_heads(x, num_heads):
    """(B, T, D) -> (B, H, T, d)."""
    ### BEGIN SOLUTION
    B, T, D = x.shape
    return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)
    ### END SOLUTION


# %% test="test_fixed_split_heads_values" points=1
"""Layer 0's Q and K of the course model, split: the model's attentions."""
check.fixed_split_heads_values(fixed_split_heads)

# %% test="test_fixed_split_heads_random" points=1
"""Tiny BERTs with other head counts and sizes."""
### BEGIN HIDDEN TESTS
check.fixed_split_heads_random(fixed_split_heads, seed=1123)
### END HIDDEN TESTS

# %% [markdown] task="diagnose_view" points=1
# **Diagnosis.** Every shape was right and nothing crashed. Which single check
# (one head, one token) shows the bug, and what does it compare?
#
# Write your answer in the cell below.
#
# === BEGIN MARK SCHEME ===
# **Model answer.** Check one head of one token by hand: the features of head h
# for token t are the slice `x[b, t, h*d:(h+1)*d]` of the (B, T, D) projection;
# compare it with the split tensor's `[b, h, t]`. With `view` straight to
# (B, H, T, d) they differ (the reshape cuts the memory in the wrong order, so the
# piece belongs to other tokens and features), although every shape is right. The
# same comparison on one head's attention (from that head's rows of the weights,
# as in 03) works too.
#
# **Rubric (1 point).**
#
# * 0.5 point: one specific check: one head h and one token t, the slice x[b, t,
#   h·d:(h+1)·d] (or a per-head computation) against the split tensor's [b, h, t].
# * 0.5 point: why it shows the bug: view without transpose regroups the numbers so
#   the piece belongs to other tokens and features, which no shape reveals.
# === END MARK SCHEME ===

# %% [markdown] open=true
# YOUR ANSWER HERE

# %% [markdown]
# ## 4. No positions: a loss that stops falling
#
# The echo task (`course.data.echo_task`): a row of 16 random tokens, and at each
# position the target is the token from 3 steps earlier. A causal model reads the
# tokens in order, so the task is easy *if* it knows which token came 3 steps
# back. Here is a small causal transformer (torch's own layers) and its training
# loop; `positions` is a (T, D) table added to the token embeddings, or None.


# %%
class EchoModel(nn.Module):
    def __init__(self, positions=None, d_model=64, heads=4):
        super().__init__()
        self.embed = nn.Embedding(data.ECHO_VOCAB, d_model)
        self.positions = positions
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(
                d_model, heads, 4 * d_model, 0.0, batch_first=True
            )
            for _ in range(2)
        )
        self.head = nn.Linear(d_model, data.ECHO_VOCAB)

    def forward(self, tokens):
        T = tokens.shape[1]
        h = self.embed(tokens)  # (B, T, D)
        if self.positions is not None:
            h = h + self.positions[:T]
        blocked = torch.ones(T, T, dtype=torch.bool).triu(1)  # torch: True = blocked
        for layer in self.layers:
            h = layer(h, src_mask=blocked)
        return self.head(h)  # (B, T, vocab)


def train_echo(positions, steps=60, lr=5e-3):
    torch.manual_seed(0)  # both runs start from the same weights and data
    gen = torch.Generator().manual_seed(0)
    net = EchoModel(positions)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        x, y = data.echo_task(32, gen)
        loss = F.cross_entropy(net(x).flatten(0, 1), y.flatten(), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


no_positions = train_echo(None)
print(
    f"without positions the loss ends at {no_positions[-1]:.2f} "
    f"(guessing among 16 tokens: ln 16 = {math.log(16):.2f})"
)

# %% [markdown]
# The loss falls at first (the model learns which tokens it has seen so far, and
# guessing among those beats guessing among all 16), then flattens: nothing tells
# it which earlier token is 3 steps back. Without a mask, attention is
# *permutation-equivariant* (08): reorder the tokens and the outputs reorder with
# them. With this causal mask, a first layer's output at position t is the same
# however the tokens before t are ordered; deeper layers could work positions out
# indirectly (by counting the tokens before them, say), but in 60 steps this model
# does not learn to.
#
# **Exercise 4.** Write `position_table(seq_len, d_model)`: a (seq_len, d_model)
# float tensor to add to the embeddings, one distinct row per position, values
# bounded (about 1 in size, like the embeddings). Sinusoids (08) are one answer;
# there are others.


# %% answer="position_table"
def position_table(seq_len, d_model):
    """(seq_len, d_model): a distinct, bounded row per position."""
    ### BEGIN SOLUTION
    pos = torch.arange(seq_len, dtype=torch.float32)[:, None]
    freq = 10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    table = torch.zeros(seq_len, d_model)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)[:, : d_model // 2]
    return table
    ### END SOLUTION


# %%
with_positions = train_echo(position_table(data.ECHO_LEN, 64))
plt.plot(no_positions, label="no positions")
plt.plot(with_positions, label="your position_table")
plt.xlabel("step")
plt.ylabel("training loss")
plt.legend()
plt.show()

# %% test="test_position_table_distinct" points=1
"""(T, D) floats, bounded, one distinct row per position."""
check.position_table_distinct(position_table)

# %% test="test_position_table_random" points=1
"""Other sizes: rows distinct, and a layer sees the order of its input."""
### BEGIN HIDDEN TESTS
check.position_table_random(position_table, seed=1124)
### END HIDDEN TESTS

# %% [markdown] task="diagnose_plateau" points=1
# **Diagnosis.** A loss that stops falling has many causes (learning rate, a bug in
# the data, too small a model). How would you show that *missing positions* is the
# cause here, in one experiment?
#
# Write your answer in the cell below.
#
# === BEGIN MARK SCHEME ===
# **Model answer.** Change one thing only: train the same model on the same data
# with the same seed, learning rate and steps twice, without and with positions
# (`position_table` added to the embeddings), and plot both losses. If the run
# with positions falls past the plateau while the other stays flat, missing
# positions is the cause; if both stay flat, look elsewhere. (A task that needs no
# order, where both runs learn, is a further control.)
#
# **Rubric (1 point).**
#
# * 0.5 point: the experiment: the same model, data, seed and settings, with positions
#   added as the only change.
# * 0.5 point: how to read it: with positions the loss falls past the plateau; if both
#   plateau, the cause is elsewhere.
# === END MARK SCHEME ===

# %% [markdown] open=true
# YOUR ANSWER HERE

# %% [markdown]
# ## 5. Memory that grows as T²
#
# Full attention builds the (B, H, Tq, Tk) scores. For one head and one example in
# float32:

# %%
for T in (512, 2048, 8192, 32768):
    print(f"T = {T:>5}: {T * T * 4 / 2**20:>8.0f} MiB for one (T, T) matrix")

# %% [markdown]
# The output is only (Tq, d), and each query needs only its own row of scores.
# Split the keys into blocks of at most `chunk_size`. For each block compute the
# scores, and keep per query a running max $m$, a running sum $\ell$ of
# $e^{s - m}$ and a running weighted sum $a$ of the values. When a new block
# raises the max from $m$ to $m'$, multiply $\ell$ and $a$ by $e^{m - m'}$ before
# adding the block's terms. At the end the context is $a / \ell$: exactly the
# softmax attention, with at most a (Tq, chunk_size) block in memory. (This is the
# idea behind FlashAttention.)
#
# Masks need one guard. With a dense mask and small blocks, a query may attend
# no key of its first block: its max is still $m' = -\infty$, and
# $e^{-\infty - (-\infty)}$ is NaN, which then spreads to $\ell$, $a$ and the
# context. Subtract 0 instead of $m'$ where $m' = -\infty$: the block's terms are
# $e^{-\infty} = 0$, it adds nothing, and every running value stays finite. (A
# query that may attend no key at all is `masked_softmax`'s case; here every query
# has at least one.)
#
# **Exercise 5.** Write `chunked_attention(Q, K, V, chunk_size, mask=None)`:
# Q (..., Tq, d), K and V (..., Tk, d), an optional bool mask (..., Tq, Tk) with
# True = may attend; return the context (..., Tq, d). Never build a whole
# (Tq, Tk) tensor (the test measures every tensor your code makes), and do not
# call `F.scaled_dot_product_attention` (turned off in the tests).


# %% answer="chunked_attention"
def chunked_attention(Q, K, V, chunk_size, mask=None):
    """Exact softmax attention over blocks of at most chunk_size keys."""
    ### BEGIN SOLUTION
    scale = 1 / math.sqrt(Q.shape[-1])
    m = torch.full(Q.shape[:-1] + (1,), float("-inf"), dtype=Q.dtype)  # (..., Tq, 1)
    total = torch.zeros_like(m)
    acc = torch.zeros(Q.shape[:-1] + V.shape[-1:], dtype=Q.dtype)  # (..., Tq, d)
    for start in range(0, K.shape[-2], chunk_size):
        k = K[..., start : start + chunk_size, :]
        v = V[..., start : start + chunk_size, :]
        s = Q @ k.transpose(-2, -1) * scale  # (..., Tq, c)
        if mask is not None:
            s = s.masked_fill(~mask[..., start : start + chunk_size], float("-inf"))
        new_m = torch.maximum(m, s.amax(-1, keepdim=True))
        safe = new_m.masked_fill(new_m == float("-inf"), 0.0)
        p = torch.exp(s - safe)
        keep = torch.exp(m - safe)
        total = total * keep + p.sum(-1, keepdim=True)
        acc = acc * keep + p @ v
        m = new_m
    return acc / total.masked_fill(total == 0, 1.0)
    ### END SOLUTION


# %%
gen = torch.Generator().manual_seed(0)
Q, K, V = (torch.randn(1, 2, n, 32, generator=gen) for n in (256, 4096, 4096))
full = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(32), -1) @ V
print(
    "largest difference:", (chunked_attention(Q, K, V, 256) - full).abs().max().item()
)

# %% test="test_chunked_attention_values" points=1
"""Equal to full attention; blocks that do not divide Tk evenly."""
check.chunked_attention_values(chunked_attention)

# %% test="test_chunked_attention_mask" points=1
"""With a bool mask (True = may attend), also a causal one."""
check.chunked_attention_mask(chunked_attention)

# %% test="test_chunked_attention_memory" points=1
"""No tensor as large as a whole (Tq, Tk) score matrix is made."""
check.chunked_attention_memory(chunked_attention)

# %% test="test_chunked_attention_random" points=2
"""Random shapes, chunk sizes, masks and dtypes."""
### BEGIN HIDDEN TESTS
check.chunked_attention_random(chunked_attention, seed=1125)
### END HIDDEN TESTS

# %% [markdown] task="diagnose_memory" points=1
# **Diagnosis.** Your model runs out of memory at T = 8192 but not at 4096. How do
# you confirm that attention's (T, T) matrices are the cause, and what does
# chunking save and what does it not (time, the weights, the other activations)?
#
# Write your answer in the cell below.
#
# === BEGIN MARK SCHEME ===
# **Model answer.** Measure and predict: the attention weights take B·H·T²
# numbers per layer (4 bytes each in float32, kept for the backward pass), so
# doubling T from 4096 to 8192 multiplies them by 4 while everything else grows by
# 2; the peak memory measured at a few lengths (a profiler, or
# `torch.cuda.max_memory_allocated`) follows that prediction. Swapping in chunked
# attention (or fused attention) and seeing 8192 fit confirms it. Chunking saves
# the (T, T) scores and weights: memory O(T·chunk) instead of O(T²). It does not
# save time (the same O(T²·d) work, slower in a Python loop), nor the weights, nor
# the other activations (O(T·D): the embeddings, the feed-forward), nor, without
# recomputation, what the backward pass keeps.
#
# **Rubric (1 point).**
#
# * 0.5 point: how to confirm: memory measured against T (×4 when T doubles) matching
#   B·H·T²·bytes, or attention swapped for a chunked one and the run fitting.
# * 0.5 point: what chunking saves (the (T, T) matrices) and what not (time: still T²
#   work; the weights; the other activations).
# === END MARK SCHEME ===

# %% [markdown] open=true
# YOUR ANSWER HERE
