# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 · Tokens in, tensors out
#
# A BERT forward pass turns a batch of token ids (B, T) into four outputs:
#
# | output | shape | what it is |
# |---|---|---|
# | `last_hidden_state` | (B, T, D) | one vector per token after the last layer |
# | `pooler_output` | (B, D) | `tanh(dense(h_[CLS]))` (not this model's sentence vector: §3) |
# | `hidden_states` | L + 1 entries of (B, T, D) | the embedding output, then each layer's |
# | `attentions` | L entries of (B, H, T, T) | each layer's attention weights, per head |
#
# With the course model D = 384, H = 12, L = 6; with bert-base-uncased D = 768,
# H = 12, L = 12. Read them off the config, never type them.

# %%
import torch

from course import data, models
from course.checks import outputs as check

model, tokenizer = models.load()
print(data.SAMPLE_TEXT)

# %% [markdown]
# ## 1. A batch of texts
#
# Texts have different lengths but a tensor is a rectangle, so the tokenizer
# **pads** the shorter ones with `[PAD]` and returns an `attention_mask` of 1 (a
# real token) and 0 (padding). Each text is framed as `[CLS] ... [SEP]`. Texts
# longer than `max_length` are **truncated** (keeping the final `[SEP]`).
#
# **Exercise 1.** Write `encode(tokenizer, texts, max_length)` returning the
# tokenizer's `BatchEncoding` of PyTorch tensors, padded to the longest text (not
# to `max_length`) and truncated at `max_length`.
#
# The tokenizer's arguments for this: `padding="longest"` (or `True`) pads to the
# longest text of the batch, `padding="max_length"` pads every text to
# `max_length`, `truncation=True` cuts texts longer than `max_length`, and
# `return_tensors="pt"` returns torch tensors instead of lists.


# %% answer="encode"
def encode(tokenizer, texts, max_length):
    """Tokenize a list of texts into one padded, truncated batch of tensors."""
    ### BEGIN SOLUTION
    return tokenizer(
        texts,
        padding="longest",
        truncation=True,
        max_length=max_length,
        return_tensors="pt",
    )
    ### END SOLUTION


# %%
batch = encode(tokenizer, [data.SAMPLE_TEXT, "A short one."], max_length=32)
print(batch["input_ids"].shape)
print(tokenizer.convert_ids_to_tokens(batch["input_ids"][1]))
print(batch["attention_mask"])

# %% test="test_encode_types" points=1
"""encode returns a BatchEncoding of tensors padded to the longest text."""
check.encode_types(encode)

# %% test="test_encode_truncates" points=1
"""encode truncates at max_length and keeps [CLS] ... [SEP]."""
check.encode_truncates(encode)

# %% test="test_encode_random" points=1
"""encode is right on random batches and max lengths."""
### BEGIN HIDDEN TESTS
check.encode_random(encode, seed=201)
### END HIDDEN TESTS

# %% [markdown]
# ## 2. What comes out
#
# The course model is loaded with `output_attentions=True` and
# `output_hidden_states=True`, and with the "eager" attention implementation (the
# fused kernels do not return attention weights: asked for them, transformers 5
# only logs a warning and leaves `attentions` empty).

# %%
with torch.no_grad():
    out = model(**batch)
for name in ("last_hidden_state", "pooler_output"):
    print(name, tuple(out[name].shape))
print("hidden_states:", len(out.hidden_states), "x", tuple(out.hidden_states[0].shape))
print("attentions:   ", len(out.attentions), "x", tuple(out.attentions[0].shape))

# %% [markdown]
# **Exercise 2.** Write `output_shapes(config, batch_size, seq_len)` returning a
# dict with the keys `last_hidden_state`, `pooler_output`, `hidden_states` (the
# shape of one entry), `num_hidden_states`, `attentions` (one entry's shape) and
# `num_attentions` — computed from the config alone, without running a model.


# %% answer="output_shapes"
def output_shapes(config, batch_size, seq_len):
    """Shapes of BertModel's outputs, from the config alone."""
    ### BEGIN SOLUTION
    B, T = batch_size, seq_len
    D, H, L = config.hidden_size, config.num_attention_heads, config.num_hidden_layers
    return {
        "last_hidden_state": (B, T, D),
        "pooler_output": (B, D),
        "hidden_states": (B, T, D),
        "num_hidden_states": L + 1,
        "attentions": (B, H, T, T),
        "num_attentions": L,
    }
    ### END SOLUTION


# %%
output_shapes(model.config, 2, 7)

# %% test="test_output_shapes_course" points=1
"""output_shapes matches the course model's real outputs."""
check.output_shapes_course(output_shapes)

# %% test="test_output_shapes_random" points=2
"""output_shapes matches BERTs of other sizes, batches and lengths."""
### BEGIN HIDDEN TESTS
check.output_shapes_random(output_shapes, seed=202)
### END HIDDEN TESTS

# %% [markdown]
# ## 3. The pooler, by hand
#
# `pooler_output` is not a mean of the tokens: BERT takes the first token's final
# vector (the `[CLS]` position), passes it through `model.pooler.dense` (a
# Linear(D, D)) and a `tanh`. Original BERT trained it, with next-sentence
# prediction, as a vector for the whole input. The course model is a
# sentence-transformers MiniLM: its sentence vector is the **mean** of the token
# vectors (its `1_Pooling/config.json` says `pooling_mode_mean_tokens`), and its
# pooler was never trained for that. For a sentence vector from this model, average
# `last_hidden_state` over the real (not padded) tokens.
#
# **Exercise 3.** Write `pooler(model, last_hidden_state)` returning (B, D),
# equal to the model's `pooler_output`. Use `model.pooler.dense`; calling
# `model.pooler` itself is turned off in the tests.


# %% answer="pooler"
def pooler(model, last_hidden_state):
    """BERT's pooler output recomputed from the last hidden state."""
    ### BEGIN SOLUTION
    first = last_hidden_state[:, 0]  # (B, D)
    return torch.tanh(model.pooler.dense(first))
    ### END SOLUTION


# %%
print((pooler(model, out.last_hidden_state) - out.pooler_output).abs().max())

# %% test="test_pooler_course" points=1
"""pooler equals the course model's pooler_output."""
check.pooler_course(pooler)

# %% test="test_pooler_random" points=2
"""pooler equals pooler_output of other BERTs and batches."""
### BEGIN HIDDEN TESTS
check.pooler_random(pooler, seed=203)
### END HIDDEN TESTS

# %% [markdown]
# ## 4. bertviz's neuron view
#
# bertviz ships its own BERT implementation for the neuron view, which also
# returns each layer's **queries** and **keys** per head. The course builds it from
# the same weights (bertviz's own loader needs the internet). Its output is a tuple
# whose last element has one entry per layer.

# %%
nv_model, nv_tokenizer = models.neuron_view_model()
ids = torch.tensor([tokenizer(data.SAMPLE_TEXT)["input_ids"]])
with torch.no_grad():
    nv_out = nv_model(ids)
print(type(nv_out), len(nv_out), type(nv_out[-1]), len(nv_out[-1]))

# %% [markdown]
# **Exercise 4.** Write `neuron_view_keys(output)` returning the keys (a list of
# str) of one layer's entry in that last element.


# %% answer="neuron_view_keys"
def neuron_view_keys(output):
    """Keys of one layer's attention entry in bertviz's neuron-view output."""
    ### BEGIN SOLUTION
    return list(output[-1][0].keys())
    ### END SOLUTION


# %%
neuron_view_keys(nv_out)

# %% test="test_neuron_view_keys_course" points=1
"""neuron_view_keys lists the keys of one layer's entry."""
check.neuron_view_keys_course(neuron_view_keys)

# %% test="test_neuron_view_keys_random" points=1
"""neuron_view_keys also works for a neuron-view model of another size."""
### BEGIN HIDDEN TESTS
check.neuron_view_keys_random(neuron_view_keys, seed=204)
### END HIDDEN TESTS
