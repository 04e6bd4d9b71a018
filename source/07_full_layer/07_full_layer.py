# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 07 · A whole BERT layer by hand
#
# Attention is one of four steps. A BERT encoder is:
#
# ```
# x = LayerNorm(word_emb[ids] + pos_emb[0..T-1] + type_emb[token_types])   # embeddings
# for each layer:
#     a = LayerNorm(x + dense(self_attention(x, mask)))                    # attention block
#     x = LayerNorm(a + dense2(gelu(dense1(a))))                           # feed-forward
# ```
#
# Two details matter for matching the numbers:
#
# * **post-LN**: BERT adds the residual first and normalises the sum,
#   `LayerNorm(x + sublayer(x))`. (Many newer models are *pre-LN*,
#   `x + sublayer(LayerNorm(x))`; BERT is not.)
# * **GELU**, exact (`erf`) form, in the feed-forward, which widens D to the
#   intermediate size (1536 here, 3072 in bert-base) and back:
#   $\operatorname{gelu}(x) = x \cdot \Phi(x) = \tfrac{x}{2}\,(1 + \operatorname{erf}(x/\sqrt{2}))$.
#   Many implementations (GPT-2, `F.gelu(x, approximate="tanh")`) use the tanh
#   approximation $\tfrac{x}{2}(1 + \tanh(\sqrt{2/\pi}\,(x + 0.044715x^3)))$;
#   on [-4, 4] the two differ by up to about 4.7e-4 (printed below), enough to
#   miss the model's numbers.
#
# Dropout (training only; at inference it is off) sits in three places in BERT:
# on the embeddings after their LayerNorm, on the attention probabilities, and on
# each sublayer's output before the residual is added.
#
# By the end of this notebook your own code reproduces every one of the model's
# `hidden_states`.

# %%
import math

import torch
import torch.nn.functional as F

from course import data, models
from course.checks import layer as check

model, tokenizer = models.load()
enc = tokenizer(*data.SENTENCE_PAIR, return_tensors="pt")
with torch.no_grad():
    out = model(**enc)
print(tokenizer.convert_ids_to_tokens(enc["input_ids"][0]))
print("token types:", enc["token_type_ids"][0].tolist())
print(model.encoder.layer[0])


# %%
x = torch.linspace(-4, 4, 801)
exact, tanh = F.gelu(x), F.gelu(x, approximate="tanh")
print(
    "erf form at 1.0:",
    exact[500].item(),
    " by hand:",
    (0.5 * (1 + math.erf(1 / math.sqrt(2)))),
)
print("largest gap between the erf and tanh forms:", (exact - tanh).abs().max().item())

# %% [markdown]
# ## 1. Embeddings
#
# Three tables, summed, then LayerNorm: the word piece, its position (0, 1, …,
# T−1) and its segment (0 for sentence A, 1 for sentence B).
#
# **Exercise 1.** Write `embeddings_forward(input_ids, token_type_ids,
# embeddings)` with `embeddings = model.embeddings`, returning (B, T, D) equal to
# `hidden_states[0]`. Use its `word_embeddings`, `position_embeddings`,
# `token_type_embeddings` and `LayerNorm`; calling `embeddings` itself is turned
# off in the tests.


# %% answer="embeddings_forward"
def embeddings_forward(input_ids, token_type_ids, embeddings):
    """BERT's embedding output (B, T, D), from the three tables and LayerNorm."""
    ### BEGIN SOLUTION
    T = input_ids.shape[1]
    positions = torch.arange(T, device=input_ids.device)  # (T,)
    x = (
        embeddings.word_embeddings(input_ids)
        + embeddings.position_embeddings(positions)
        + embeddings.token_type_embeddings(token_type_ids)
    )
    return embeddings.LayerNorm(x)
    ### END SOLUTION


# %%
with torch.no_grad():
    e = embeddings_forward(enc["input_ids"], enc["token_type_ids"], model.embeddings)
print((e - out.hidden_states[0]).abs().max())

# %% test="test_embeddings_forward_shape" points=1
"""embeddings_forward gives (B, T, D)."""
check.embeddings_forward_shape(embeddings_forward)

# %% test="test_embeddings_forward_values" points=1
"""embeddings_forward equals hidden_states[0] on a sentence pair."""
check.embeddings_forward_values(embeddings_forward)

# %% test="test_embeddings_forward_random" points=2
"""embeddings_forward is right for other sizes, batches and token types."""
### BEGIN HIDDEN TESTS
check.embeddings_forward_random(embeddings_forward, seed=701)
### END HIDDEN TESTS

# %% [markdown]
# ## 2. The attention block
#
# `layer.attention` holds `self` (the query/key/value projections of 06) and
# `output` (a `dense` Linear(D, D), dropout and a `LayerNorm`). The block is
# `LayerNorm(x + dense(context))`.
#
# **Exercise 2.** Write `attention_block(hidden, attention, attention_mask=None)`
# with `attention = layer.attention`, returning (B, T, D). First write the helper
# `self_attention(hidden, self_attn, attention_mask=None)`: all heads' context,
# merged to (B, T, D), by hand from `self_attn.query`, `.key` and `.value` (06's
# `multi_head_attention`, without the probabilities). Then the block itself: the
# output `dense`, the residual and the `LayerNorm`. Calling `attention`,
# `attention.self` or `attention.output` is turned off.


# %% answer="attention_block"
def self_attention(hidden, self_attn, attention_mask=None):
    """All heads' merged context (B, T, D), by hand (as in 06)."""
    ### BEGIN SOLUTION
    B, T, D = hidden.shape
    H = self_attn.num_attention_heads
    d = D // H

    def split(linear):
        return linear(hidden).view(B, T, H, d).transpose(1, 2)  # (B, H, T, d)

    q, k, v = split(self_attn.query), split(self_attn.key), split(self_attn.value)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)  # (B, H, T, T)
    if attention_mask is not None:
        pad = 1.0 - attention_mask[:, None, None, :].to(scores.dtype)
        scores = scores + pad * torch.finfo(scores.dtype).min
    probs = torch.softmax(scores, dim=-1)
    return (probs @ v).transpose(1, 2).reshape(B, T, D)
    ### END SOLUTION


def attention_block(hidden, attention, attention_mask=None):
    """Self-attention, output dense, residual, LayerNorm: (B, T, D)."""
    ### BEGIN SOLUTION
    context = self_attention(hidden, attention.self, attention_mask)
    return attention.output.LayerNorm(hidden + attention.output.dense(context))
    ### END SOLUTION


# %% test="test_attention_block_values" points=1
"""attention_block equals layer 2's attention output."""
check.attention_block_values(attention_block)

# %% test="test_attention_block_mask" points=1
"""attention_block is right on a padded batch with its mask."""
check.attention_block_mask(attention_block)

# %% test="test_attention_block_random" points=2
"""attention_block is right for other models, layers, batches and padding."""
### BEGIN HIDDEN TESTS
check.attention_block_random(attention_block, seed=702)
### END HIDDEN TESTS

# %% [markdown]
# ## 3. The feed-forward block
#
# `layer.intermediate.dense` widens D to the intermediate size, GELU, then
# `layer.output.dense` narrows back to D; residual and `layer.output.LayerNorm`.
#
# **Exercise 3.** Write `feed_forward(hidden, layer)`: (B, T, D) → (B, T, D),
# where `hidden` is the attention block's output. Calling `layer`,
# `layer.intermediate` or `layer.output` is turned off; their Linear and
# LayerNorm parts are yours to use.


# %% answer="feed_forward"
def feed_forward(hidden, layer):
    """LayerNorm(x + W2 gelu(W1 x)): (B, T, D)."""
    ### BEGIN SOLUTION
    inner = F.gelu(layer.intermediate.dense(hidden))  # (B, T, intermediate)
    return layer.output.LayerNorm(hidden + layer.output.dense(inner))
    ### END SOLUTION


# %% test="test_feed_forward_values" points=1
"""feed_forward equals layer 2's output given its attention output."""
check.feed_forward_values(feed_forward)

# %% test="test_feed_forward_random" points=2
"""feed_forward is right for other models and layers."""
### BEGIN HIDDEN TESTS
check.feed_forward_random(feed_forward, seed=703)
### END HIDDEN TESTS

# %% [markdown]
# ## 4. A layer, then the encoder
#
# **Exercise 4.** Write `bert_layer(hidden, layer, attention_mask=None)`: one
# whole layer, (B, T, D) → (B, T, D).


# %% answer="bert_layer"
def bert_layer(hidden, layer, attention_mask=None):
    """One BERT layer: attention block, then feed-forward."""
    ### BEGIN SOLUTION
    return feed_forward(attention_block(hidden, layer.attention, attention_mask), layer)
    ### END SOLUTION


# %% test="test_bert_layer_values" points=1
"""bert_layer maps hidden_states[2] to hidden_states[3]."""
check.bert_layer_values(bert_layer)

# %% test="test_bert_layer_mask" points=1
"""bert_layer is right on a padded batch with its mask."""
check.bert_layer_mask(bert_layer)

# %% test="test_bert_layer_random" points=2
"""bert_layer is right for other models, layers, batches and padding."""
### BEGIN HIDDEN TESTS
check.bert_layer_random(bert_layer, seed=704)
### END HIDDEN TESTS

# %% [markdown]
# **Exercise 5.** Write `bert_encoder(input_ids, token_type_ids, model,
# attention_mask=None)` returning a tuple of L + 1 tensors (B, T, D) equal to the
# model's `hidden_states`: the embedding output, then each layer's output.


# %% answer="bert_encoder"
def bert_encoder(input_ids, token_type_ids, model, attention_mask=None):
    """Every hidden state of BERT, by hand: a tuple of L + 1 (B, T, D) tensors."""
    ### BEGIN SOLUTION
    states = [embeddings_forward(input_ids, token_type_ids, model.embeddings)]
    for layer in model.encoder.layer:
        states.append(bert_layer(states[-1], layer, attention_mask))
    return tuple(states)
    ### END SOLUTION


# %%
batch = tokenizer([data.SAMPLE_TEXT, "A short one."], padding=True, return_tensors="pt")
with torch.no_grad():
    ours = bert_encoder(
        batch["input_ids"], batch["token_type_ids"], model, batch["attention_mask"]
    )
    theirs = model(**batch).hidden_states
for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
    print(f"hidden_states[{i}]: largest difference {(a - b).abs().max():.2e}")

# %% test="test_bert_encoder_length" points=1
"""bert_encoder returns L + 1 tensors of shape (B, T, D)."""
check.bert_encoder_length(bert_encoder)

# %% test="test_bert_encoder_values" points=1
"""bert_encoder equals the model's hidden_states on a padded batch."""
check.bert_encoder_values(bert_encoder)

# %% test="test_bert_encoder_random" points=2
"""bert_encoder is right for other models, batches, token types and padding."""
### BEGIN HIDDEN TESTS
check.bert_encoder_random(bert_encoder, seed=705)
### END HIDDEN TESTS
