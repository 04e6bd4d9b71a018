# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 · One head's weights
#
# ## Before the code: what Q, K and V are for
#
# Attention lets every token build its new vector out of the others. Think of a
# library search:
#
# * the **query** q of a token says *what it is looking for* ("bank": am I next
#   to water or money?);
# * the **key** k of a token says *what it offers* to a search ("river": a place
#   by water);
# * the **value** v of a token is *what it hands over* when it is chosen.
#
# The score of token i for token j is the dot product q_i · k_j: large when what
# i looks for matches what j offers. Softmax turns token i's scores into weights
# over all j (05), and i's new vector is the weighted sum of the values (06). Q,
# K and V are three different linear maps of the same hidden vectors, so a token
# can look for one thing, offer another, and pass on a third.
#
# **Why several heads?** One softmax gives one weighting per token: it can follow
# one relation at a time. BERT runs H attentions side by side on smaller vectors
# (d = D / H each), each with its own Q, K, V slices; one head may follow the
# previous token, another the object of a verb, another [SEP] (10 draws them).
# Their contexts are concatenated and mixed by one output projection. The
# arithmetic costs about as much as one big head, since H · d = D; the memory
# does not: each head has its own (T, T) matrix of probabilities, H times as
# many numbers as one big head would keep.
#
# **Self- or cross-attention?** In *self*-attention (BERT) queries, keys and
# values all come from the same sequence. In *cross*-attention (a translation
# model's decoder reading its encoder) the queries come from one sequence and the
# keys and values from another, so the weights are (Tq, Tk), and Tq and Tk may
# differ. The formula does not change; that is why the course writes shapes as
# (Tq, Tk).
#
# ## Where one head lives
#
# BERT does not store one small matrix per head. Each layer has **one** query
# projection `nn.Linear(D, D)` shared by all H heads: its output vector of size D
# is H pieces of size d = D // H laid end to end, piece h belonging to head h.
#
# `nn.Linear` stores `weight` as (out_features, in_features) and computes
# `y = x @ W.T + b`. Output feature j is row j of W dotted with x, plus b[j]. So
# the outputs of head h — features h·d … (h+1)·d − 1 — come from the **rows**
# h·d:(h+1)·d of W and the same slice of b. The head lives in rows, not columns.

# %%
import matplotlib.pyplot as plt
import torch

from course import data, models
from course.checks import heads as check

model, tokenizer = models.load()
config = model.config
D, H = config.hidden_size, config.num_attention_heads
d = D // H
print(f"D = {D}, H = {H}, d = {d}")

# %% [markdown]
# The picture below is layer 0's query weight, (D, D). The red lines split its
# rows into H blocks of d rows: one block per head.

# %%
W = model.encoder.layer[0].attention.self.query.weight.detach()
fig, ax = plt.subplots(figsize=(5, 5))
ax.imshow(W, cmap="RdBu", vmin=-0.2, vmax=0.2)
for h in range(1, H):
    ax.axhline(h * d - 0.5, color="red", lw=0.6)
ax.set(
    xlabel="in feature (column)",
    ylabel="out feature (row)",
    title="query.weight: H row blocks",
)
plt.show()

# %% [markdown]
# **Exercise 1.** Write `head_params(linear, head, head_size)` returning
# `(W_h, b_h)`: the head's weight, shape (d, D), and its bias, shape (d,).


# %% answer="head_params"
def head_params(linear, head, head_size):
    """Weight rows (d, D) and bias (d,) of one head inside a fused projection."""
    ### BEGIN SOLUTION
    rows = slice(head * head_size, (head + 1) * head_size)
    return linear.weight[rows], linear.bias[rows]
    ### END SOLUTION


# %%
W_h, b_h = head_params(model.encoder.layer[0].attention.self.query, 0, d)
print(tuple(W_h.shape), tuple(b_h.shape))

# %% test="test_head_params_shape" points=1
"""head_params returns W_h of shape (d, D) and b_h of shape (d,)."""
check.head_params_shape(head_params)

# %% test="test_head_params_weight" points=1
"""W_h is the head's block of rows (heads 0 and 5 of layer 0's query)."""
check.head_params_weight(head_params)

# %% test="test_head_params_bias" points=1
"""b_h is the head's slice of the bias."""
check.head_params_bias(head_params)

# %% test="test_head_params_random" points=2
"""head_params is right for other head counts, head sizes and heads."""
### BEGIN HIDDEN TESTS
check.head_params_random(head_params, seed=301)
### END HIDDEN TESTS

# %% [markdown]
# ## Projecting onto one head
#
# With the head's rows, one head's queries are `x @ W_h.T + b_h`: (T, D) @ (D, d)
# gives (T, d). That is d·D multiply-adds per token instead of D·D for the whole
# layer. The same works for any leading batch dimensions.
#
# **Exercise 2.** Write `project_head(x, linear, head, head_size)` for x of shape
# (..., T, D), returning (..., T, d). Use the head's parameters; calling the whole
# layer is turned off in the tests.


# %% answer="project_head"
def project_head(x, linear, head, head_size):
    """One head's projection of x (..., T, D) -> (..., T, d)."""
    ### BEGIN SOLUTION
    W_h, b_h = head_params(linear, head, head_size)
    return x @ W_h.T + b_h
    ### END SOLUTION


# %%
with torch.no_grad():
    out = model(**tokenizer(data.SAMPLE_TEXT, return_tensors="pt"))
x = out.hidden_states[0][0]  # (T, D): the embedding output, the input of layer 0
tokens = tokenizer.convert_ids_to_tokens(tokenizer(data.SAMPLE_TEXT)["input_ids"])
print(len(tokens), "tokens:", tokens)
print(tuple(project_head(x, model.encoder.layer[0].attention.self.query, 0, d).shape))

# %% test="test_project_head_course" points=1
"""project_head equals the query layer's output for one head on the sample text."""
check.project_head_course(project_head)

# %% test="test_project_head_random" points=2
"""project_head is right for other sizes, heads and batch shapes."""
### BEGIN HIDDEN TESTS
check.project_head_random(project_head, seed=302)
### END HIDDEN TESTS

# %% [markdown]
# ## The first head's Q, K and V
#
# **Exercise 3.** On the sample text (`x` above: layer 0's input), compute
# layer 0, head 0's queries, keys and values, each (T, d), as
# `Q_first_head_first_layer`, `K_first_head_first_layer` and
# `V_first_head_first_layer`. The tests compare Q and K with bertviz's
# neuron-view model, which returns every head's queries and keys.

# %% answer="first_head_qkv"
self_attn = model.encoder.layer[0].attention.self
### BEGIN SOLUTION
with torch.no_grad():
    Q_first_head_first_layer = project_head(x, self_attn.query, 0, d)
    K_first_head_first_layer = project_head(x, self_attn.key, 0, d)
    V_first_head_first_layer = project_head(x, self_attn.value, 0, d)
### END SOLUTION

# %%
print(tuple(Q_first_head_first_layer.shape), tuple(K_first_head_first_layer.shape))

# %% test="test_first_head_qkv_q" points=1
"""Q of layer 0, head 0 matches bertviz's neuron-view queries."""
check.first_head_q(Q_first_head_first_layer)

# %% test="test_first_head_qkv_k" points=1
"""K of layer 0, head 0 matches bertviz's neuron-view keys."""
check.first_head_k(K_first_head_first_layer)

# %% test="test_first_head_qkv_v" points=1
"""V of layer 0, head 0 matches the value layer's output for head 0."""
check.first_head_v(V_first_head_first_layer)
