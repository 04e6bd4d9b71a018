# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 09 · Build a transformer
#
# You have taken BERT apart; now build the parts yourself as `nn.Module`s, check
# them against PyTorch's own `nn.MultiheadAttention` and
# `nn.TransformerEncoderLayer`, and train a tiny causal model on a task that needs
# word order — once with positions and once without.

# %%
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from course.checks import transformer as check
from course.data import ECHO_LAG, ECHO_LEN, ECHO_VOCAB, echo_task

# %% [markdown]
# ## 1. Multi-head self-attention as a module
#
# Four `nn.Linear(D, D)` layers with bias: `q_proj`, `k_proj`, `v_proj`,
# `out_proj`. `forward(x, mask=None)` takes x (B, T, D) and an optional bool mask,
# (T, T) or (B, T, T), **True where a query may attend a key**, and returns
# `(out (B, T, D), probs (B, H, T, T))`: the same computation as 06 plus the
# output projection. Nothing of 04 or 06 is defined in this notebook: write the
# head split and merge again here (as methods, or helpers in the answer cell).
#
# Bool masks are a trap, because PyTorch itself uses both conventions:
# `F.scaled_dot_product_attention(attn_mask=...)` reads True as *may attend* (ours),
# while `nn.MultiheadAttention` and `nn.TransformerEncoderLayer` read True in
# `attn_mask` / `src_mask` as *blocked*. Check which one a function wants.


# %% answer="MultiHeadSelfAttention"
class MultiHeadSelfAttention(nn.Module):
    """Multi-head self-attention with its own Q, K, V and output projections."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        ### BEGIN SOLUTION
        self.num_heads = num_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        ### END SOLUTION

    def forward(self, x, mask=None):
        ### BEGIN SOLUTION
        B, T, D = x.shape
        H = self.num_heads
        d = D // H

        def split(linear):
            return linear(x).view(B, T, H, d).transpose(1, 2)  # (B, H, T, d)

        q, k, v = split(self.q_proj), split(self.k_proj), split(self.v_proj)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d)  # (B, H, T, T)
        if mask is not None:
            allowed = mask if mask.dim() == 2 else mask[:, None]  # broadcast over heads
            scores = scores.masked_fill(~allowed, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        context = (probs @ v).transpose(1, 2).reshape(B, T, D)
        return self.out_proj(context), probs
        ### END SOLUTION


# %%
att = MultiHeadSelfAttention(32, 4)
out, probs = att(torch.randn(2, 5, 32), torch.ones(5, 5, dtype=torch.bool).tril())
print(tuple(out.shape), tuple(probs.shape))

# %% test="test_MultiHeadSelfAttention_structure" points=1
"""MultiHeadSelfAttention has q/k/v/out projections and returns (out, probs)."""
check.mhsa_structure(MultiHeadSelfAttention)

# %% test="test_MultiHeadSelfAttention_values" points=1
"""Without a mask, out and probs equal torch's MultiheadAttention with the same weights."""
check.mhsa_values(MultiHeadSelfAttention)

# %% test="test_MultiHeadSelfAttention_mask" points=1
"""With (T, T) and (B, T, T) masks, out and probs equal torch's."""
check.mhsa_mask(MultiHeadSelfAttention)

# %% test="test_MultiHeadSelfAttention_random" points=2
"""MultiHeadSelfAttention is right for other widths, heads, batches and masks."""
### BEGIN HIDDEN TESTS
check.mhsa_random(MultiHeadSelfAttention, seed=901)
### END HIDDEN TESTS

# %% [markdown]
# ## 2. An encoder block, post-LN or pre-LN
#
# `EncoderBlock(d_model, num_heads, d_ff, norm_first)` holds `attn` (your
# MultiHeadSelfAttention), `norm1`, `norm2` (LayerNorm) and `ff` =
# `nn.Sequential(Linear(D, d_ff), ReLU(), Linear(d_ff, D))`, with no dropout.
#
# The feed-forward uses ReLU, as torch's `TransformerEncoderLayer` does by default
# (the oracle below); BERT's own feed-forward uses GELU (07).
#
# * `norm_first=False` (post-LN, the arrangement of BERT and the original
#   Transformer): `x = norm1(x + attn(x))`, then
#   `x = norm2(x + ff(x))`.
# * `norm_first=True` (pre-LN, GPT-2 and most newer models): `x = x + attn(norm1(x))`,
#   then `x = x + ff(norm2(x))`. Pre-LN keeps an un-normalised residual path from
#   input to output, which makes deep stacks easier to train.


# %% answer="EncoderBlock"
class EncoderBlock(nn.Module):
    """A transformer encoder block, post-LN or pre-LN, dropout-free."""

    def __init__(self, d_model, num_heads, d_ff, norm_first):
        super().__init__()
        ### BEGIN SOLUTION
        self.norm_first = norm_first
        self.attn = MultiHeadSelfAttention(d_model, num_heads)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(
            nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model)
        )
        ### END SOLUTION

    def forward(self, x, mask=None):
        ### BEGIN SOLUTION
        if self.norm_first:
            x = x + self.attn(self.norm1(x), mask)[0]
            return x + self.ff(self.norm2(x))
        x = self.norm1(x + self.attn(x, mask)[0])
        return self.norm2(x + self.ff(x))
        ### END SOLUTION


# %% test="test_EncoderBlock_post_ln" points=1
"""norm_first=False equals torch's TransformerEncoderLayer (post-LN)."""
check.block_post_ln(EncoderBlock)

# %% test="test_EncoderBlock_pre_ln" points=1
"""norm_first=True equals torch's TransformerEncoderLayer (pre-LN), with a mask."""
check.block_pre_ln(EncoderBlock)

# %% test="test_EncoderBlock_random" points=2
"""EncoderBlock is right for other sizes, both settings, with and without masks."""
### BEGIN HIDDEN TESTS
check.block_random(EncoderBlock, seed=902)
### END HIDDEN TESTS

# %% [markdown]
# ## 3. Train a tiny causal transformer on a task that needs order
#
# The task: `echo_task(batch, generator)` (from `course.data`) returns
# `(tokens, targets)`, two LongTensors of shape (batch, 16). A row of tokens is 16
# random tokens out of 16, and at each position the target is the token from **3
# steps earlier** (the first three targets are -100, ignored by `cross_entropy`).
# The model is *causal*: position t may attend only positions ≤ t, as a language
# model reads. To answer, it must find the token exactly 3 steps back. Without
# positions that is hard: in one
# causal attention layer, the output at position t stays the same when the tokens
# before t are reordered, so it sees which tokens came, not when. (08 showed the
# unmasked case: reorder all tokens and the outputs reorder with them.) Stacked
# causal layers could work positions out indirectly, for instance by counting the
# tokens before them, but this small model does not learn that here.
#
# `TinyTransformer` is given: an embedding, optional sinusoidal positions, two of
# **your** pre-LN `EncoderBlock`s with a causal mask, and a linear head.
#
# **Exercise 3.** Write `train_tiny_transformer(seed, use_positions=True)`
# returning `(model, history)`:
#
# * build `TinyTransformer(ECHO_VOCAB, ECHO_LEN, d_model=64, num_heads=4,
#   use_positions=use_positions)` and train it with Adam, learning rate 5e-3, for
#   100 steps, each on a fresh batch of 32 from `echo_task(32, generator)`;
# * `history` is a dict with at least `"loss"`: the training loss per step;
# * the same seed gives the same run (seed torch and your generator from it); it
#   takes a few seconds on a CPU;
# * with positions, held-out accuracy reaches 85%; without, it stays far below
#   (the tests check at most 50%). Without positions the best it can do is guess
#   the most frequent earlier token: about 26% here.


# %%
def sinusoids(T, D):
    """Sinusoidal positions (T, D), as in 08."""
    pos = torch.arange(T, dtype=torch.float32)[:, None]
    angle = pos / 10000 ** (torch.arange(0, D, 2, dtype=torch.float32) / D)
    pe = torch.zeros(T, D)
    pe[:, 0::2], pe[:, 1::2] = angle.sin(), angle.cos()
    return pe


class TinyTransformer(nn.Module):
    """Embedding (+ positions), two causal pre-LN blocks, a linear head."""

    def __init__(self, vocab_size, seq_len, d_model, num_heads, use_positions):
        super().__init__()
        self.vocab_size, self.seq_len = vocab_size, seq_len
        self.use_positions = use_positions
        self.embed = nn.Embedding(vocab_size, d_model)
        self.register_buffer("positions", sinusoids(seq_len, d_model))
        self.blocks = nn.ModuleList(
            EncoderBlock(d_model, num_heads, 2 * d_model, True) for _ in range(2)
        )
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens):
        T = tokens.shape[1]
        h = self.embed(tokens)  # (B, T, D)
        if self.use_positions:
            h = h + self.positions[:T]
        causal = torch.ones(T, T, dtype=torch.bool).tril()  # True = may attend
        for block in self.blocks:
            h = block(h, causal)
        return self.head(h)  # (B, T, vocab)


# %% answer="train_tiny_transformer"
def train_tiny_transformer(seed, use_positions=True):
    """Train on echo_task; return (model, history)."""
    ### BEGIN SOLUTION
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = TinyTransformer(ECHO_VOCAB, ECHO_LEN, 64, 4, use_positions)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    val_x, val_y = echo_task(64, torch.Generator().manual_seed(seed + 1))
    history = {"loss": [], "val_accuracy": []}
    for step in range(100):
        x, y = echo_task(32, gen)
        logits = model(x)  # (B, T, vocab)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        history["loss"].append(loss.item())
        if step % 10 == 9:
            with torch.no_grad():
                hit = model(val_x).argmax(-1) == val_y
            history["val_accuracy"].append(hit[val_y != -100].float().mean().item())
    return model.eval(), history
    ### END SOLUTION


# %%
# Seed 0, with and without positions: {use_positions: history}. The tests below
# look at these same two runs, so each is trained once.
runs = check.train_both(train_tiny_transformer)
fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
for use, history in runs.items():
    label = "with positions" if use else "without positions"
    axes[0].plot(history["loss"], label=label)
    axes[1].plot(history.get("val_accuracy", []), label=label)
axes[0].set(title="training loss", xlabel="step")
axes[1].set(
    title=f"held-out accuracy (lag {ECHO_LAG})", xlabel="evaluation", ylim=(0, 1.05)
)
axes[1].legend()
plt.show()

# %% test="test_train_tiny_transformer_positions" points=2
"""With positions the model echoes the token 3 steps back on held-out data (>= 85%)."""
check.train_with_positions(train_tiny_transformer)

# %% test="test_train_tiny_transformer_no_positions" points=1
"""Without positions it cannot (held-out accuracy <= 50%)."""
check.train_without_positions(train_tiny_transformer)

# %% test="test_train_tiny_transformer_deterministic" points=1
"""The same seed gives the same run."""
### BEGIN HIDDEN TESTS
check.train_deterministic(train_tiny_transformer, seed=0)
### END HIDDEN TESTS

# %% [markdown]
# ## 4. What attention costs
#
# Computed the way this course does it (eager attention, and whatever
# `output_attentions=True` needs), every head of every example builds a (T, T)
# matrix of probabilities: memory grows with T². Fused kernels
# (FlashAttention, and the flash and memory-efficient backends of torch's
# `scaled_dot_product_attention`) never build it whole; 11 shows how. With 4-byte floats, batch 8, 12 heads and T = 512 that is already
# 8·12·512²·4 bytes ≈ 100 MB — per layer.
#
# **Exercise 4.** Write `attention_memory(batch, heads, seq_len,
# bytes_per_value=4)` returning the bytes of one layer's attention probabilities,
# as an int.


# %% answer="attention_memory"
def attention_memory(batch, heads, seq_len, bytes_per_value=4):
    """Bytes of one (B, H, T, T) attention tensor."""
    ### BEGIN SOLUTION
    return batch * heads * seq_len * seq_len * bytes_per_value
    ### END SOLUTION


# %%
lengths = [128, 256, 512, 1024, 2048, 4096]
mib = [attention_memory(8, 12, T) / 2**20 for T in lengths]
plt.plot(lengths, mib, marker="o")
plt.xscale("log", base=2)
plt.yscale("log", base=2)
plt.xlabel("sequence length T")
plt.ylabel("MiB per layer (B=8, H=12, float32)")
plt.title("attention memory grows with T squared")
plt.show()

# %% test="test_attention_memory_small" points=1
"""attention_memory(2, 12, 128) matches a real float32 tensor of that shape."""
check.attention_memory_small(attention_memory)

# %% test="test_attention_memory_random" points=1
"""attention_memory is right for other sizes and dtypes."""
### BEGIN HIDDEN TESTS
check.attention_memory_random(attention_memory, seed=904)
### END HIDDEN TESTS
