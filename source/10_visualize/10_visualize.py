# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 10 · Seeing attention
#
# You can compute every attention weight BERT uses. Now look at them: a heatmap
# of one head, the tokens one query attends to most, a search for heads with a
# job (attending to the previous token), bertviz's three interactive views —
# which here draw without an internet connection (the course inlines the
# JavaScript they need into each output) — and, last, a text too long for the
# model: truncation, the T² cost, and the heads that look far.

# %%
import matplotlib.pyplot as plt
import torch

from course import data, models, viz
from course.checks import pictures as check

model, tokenizer = models.load()
enc = tokenizer(data.SAMPLE_TEXT, return_tensors="pt")
tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
with torch.no_grad():
    attentions = model(**enc).attentions  # L x (1, H, T, T)
print(len(attentions), "layers of", tuple(attentions[0].shape))

# %% [markdown]
# ## 1. A heatmap of one head
#
# Row i of a head's (T, T) matrix is where query token i looks; column j is key
# token j. Draw it with rows down the y axis and columns along x, so that reading
# a row reads one token's attention.
#
# **Exercise 1.** Write `attention_heatmap(probs, tokens, ax=None)`: draw `probs`
# (T, T) as an image (`imshow`) with the tokens as tick labels on both axes, on
# `ax` if given (else a new figure), and return the Axes.


# %% answer="attention_heatmap"
def attention_heatmap(probs, tokens, ax=None):
    """Image of a (T, T) attention matrix with token tick labels; returns the Axes."""
    ### BEGIN SOLUTION
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 5))
    ax.imshow(probs.detach().cpu(), cmap="viridis", vmin=0)
    ax.set_xticks(range(len(tokens)), tokens, rotation=90)
    ax.set_yticks(range(len(tokens)), tokens)
    ax.set(xlabel="key", ylabel="query")
    return ax
    ### END SOLUTION


# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 5))
attention_heatmap(attentions[0][0, 0], tokens, ax=axes[0]).set_title("layer 0, head 0")
attention_heatmap(attentions[3][0, 5], tokens, ax=axes[1]).set_title("layer 3, head 5")
plt.show()

# %% test="test_attention_heatmap_image" points=1
"""attention_heatmap returns an Axes whose image is probs (not transposed)."""
check.heatmap_image(attention_heatmap)

# %% test="test_attention_heatmap_ax" points=1
"""attention_heatmap draws on a given Axes, with the tokens as tick labels on both axes."""
check.heatmap_given_ax(attention_heatmap)

# %% test="test_attention_heatmap_random" points=1
"""attention_heatmap is right for other sizes and tokens."""
### BEGIN HIDDEN TESTS
check.heatmap_random(attention_heatmap, seed=1001)
### END HIDDEN TESTS

# %% [markdown]
# ## 2. What does one token look at?
#
# **Exercise 2.** Write `top_attended(probs, tokens, query_index, k)` returning
# the k tokens that query `query_index` attends to most, most attended first, as
# a list of str (a tuple is fine too).


# %% answer="top_attended"
def top_attended(probs, tokens, query_index, k):
    """The k tokens that one query attends to most, most attended first."""
    ### BEGIN SOLUTION
    top = torch.topk(probs[query_index], k).indices
    return [tokens[j] for j in top.tolist()]
    ### END SOLUTION


# %%
banks = [i for i, t in enumerate(tokens) if t == "bank"]
for layer in (0, 5):
    for i in banks:
        print(
            f"layer {layer}, 'bank' at {i} looks at:",
            top_attended(attentions[layer][0].mean(0), tokens, i, 4),
        )

# %% test="test_top_attended_small" points=1
"""top_attended returns the k most attended tokens of a row, most attended first."""
check.top_attended_small(top_attended)

# %% test="test_top_attended_random" points=1
"""top_attended is right for other sizes, queries and k."""
### BEGIN HIDDEN TESTS
check.top_attended_random(top_attended, seed=1002)
### END HIDDEN TESTS

# %% [markdown]
# ## 3. Heads with a job: previous-token heads
#
# Some heads attend mostly to the token just before the query — a position-based
# pattern you can find by measuring. For query i (i ≥ 1) the previous token is
# key i − 1: the diagonal just **below** the main one.
#
# **Exercise 3.** Write `previous_token_heads(attentions, threshold)`: for
# `attentions`, a tuple of L tensors (B, H, T, T), return the (layer, head) pairs
# whose mean attention to the previous token (over queries 1..T−1 and the batch)
# is at least `threshold`.


# %% answer="previous_token_heads"
def previous_token_heads(attentions, threshold):
    """(layer, head) pairs whose mean attention to the previous token >= threshold."""
    ### BEGIN SOLUTION
    found = []
    for layer, probs in enumerate(attentions):
        prev = torch.diagonal(probs, offset=-1, dim1=-2, dim2=-1)  # (B, H, T-1)
        for head, score in enumerate(prev.mean(dim=(0, 2)).tolist()):
            if score >= threshold:
                found.append((layer, head))
    return found
    ### END SOLUTION


# %%
heads = previous_token_heads(attentions, 0.3)
print(heads)

# %% test="test_previous_token_heads_model" points=1
"""previous_token_heads finds the course model's previous-token heads."""
check.previous_token_heads_model(previous_token_heads)

# %% test="test_previous_token_heads_random" points=2
"""previous_token_heads finds planted heads in other attentions and batches."""
### BEGIN HIDDEN TESTS
check.previous_token_heads_random(previous_token_heads, seed=1003)
### END HIDDEN TESTS

# %% [markdown]
# ## 4. bertviz, offline
#
# **Head view**: one layer, every head in its own colour; hover a token to see
# where it looks. Here on a sentence pair, so you can see attention cross the
# `[SEP]` between the two sentences (choose "Sentence A -> Sentence B").

# %%
pair_attentions, pair_tokens, b_start = viz.attention_inputs(*data.SENTENCE_PAIR)
viz.head_view(pair_attentions, pair_tokens, b_start)

# %% [markdown]
# **Model view**: every layer (rows) and head (columns) as a thumbnail; click one
# to enlarge it. Look for the previous-token heads you found above.

# %%
viz.model_view(attentions, tokens)

# %% [markdown]
# **Neuron view**: for one head, the query and key vectors behind each weight —
# q · k, scaled and softmaxed, exactly what you computed in 05 and 06. Pick a
# token on the left to see its query meet every key.

# %%
viz.neuron_view(data.SAMPLE_TEXT, layer=0, head=0)

# %% [markdown]
# ## 5. A long text: truncation, T², and heads that look far
#
# The texts so far had 16 to 18 tokens. Real inputs are longer. `data.long_text()`
# is a newsgroup post of at least 600 words, more word pieces than BERT has
# positions: a real 20 newsgroups post when scikit-learn has that corpus cached,
# otherwise the course's own post in its style, of about 700 word pieces (the
# corpus is a download, and the course runs offline).
#
# BERT learned one position vector per position, `max_position_embeddings` of
# them (512), so the tail of a longer input has no position to take: the tokenizer
# must cut it. `truncation=True, max_length=...` keeps the first tokens and still
# ends with `[SEP]`. (To read a whole document, split it into overlapping windows:
# `return_overflowing_tokens=True, stride=...`.)

# %%
post = data.long_text()
max_len = model.config.max_position_embeddings
n_pieces = len(tokenizer(post)["input_ids"])
enc_long = tokenizer(post, truncation=True, max_length=max_len, return_tensors="pt")
long_tokens = tokenizer.convert_ids_to_tokens(enc_long["input_ids"][0])
print(n_pieces, "word pieces; the model has", max_len, "positions")
print("kept", len(long_tokens), "ending with", long_tokens[-3:])

# %% [markdown]
# With eager attention every head of every layer builds a (T, T) matrix of
# weights (the fused kernels of 02 never store it whole): L · H · T² numbers, so
# doubling T makes that memory four times larger. To stay light, run the post cut
# at half the maximum length; check the formula against what the model returns,
# then see how it grows:

# %%
enc_half = tokenizer(
    post, truncation=True, max_length=max_len // 2, return_tensors="pt"
)
half_tokens = tokenizer.convert_ids_to_tokens(enc_half["input_ids"][0])
with torch.no_grad():
    long_attentions = model(**enc_half).attentions  # L x (1, H, T, T)
T = len(half_tokens)
L, H = len(long_attentions), long_attentions[0].shape[1]
measured = sum(a.numel() * a.element_size() for a in long_attentions)
formula = L * H * T * T * 4  # float32: 4 bytes a weight
print(
    f"T = {T}: measured {measured / 2**20:.1f} MiB, formula {formula / 2**20:.1f} MiB"
)
for t in (T // 4, T // 2, T, 2 * T, 4 * T, 16 * T):
    print(f"T = {t:4d}: {L * H * t * t * 4 / 2**20:8.1f} MiB of attention weights")

# %% [markdown]
# Which heads look far? For one head, weight each key's distance |i − j| from the
# query by the attention it gets, and average over the queries. A previous-token
# head scores about 1; a head that spreads evenly over the whole text scores about
# T / 3.

# %%
positions = torch.arange(T)
gap = (positions[:, None] - positions[None, :]).abs().float()  # (T, T): |i - j|
distance = torch.stack([(a[0] * gap).sum(-1).mean(-1) for a in long_attentions])
plt.imshow(distance, cmap="magma")  # (L, H)
plt.colorbar(label="mean distance (tokens)")
plt.xlabel("head")
plt.ylabel("layer")
plt.show()

layer, head = divmod(int(distance.argmax()), distance.shape[1])
far = long_attentions[layer][0, head]  # (T, T)
special = [i for i, t in enumerate(half_tokens) if t in ("[CLS]", "[SEP]")]
print(f"farthest: layer {layer}, head {head}, {distance[layer, head]:.0f} tokens")
print(f"its attention on [CLS] and [SEP]: {far[:, special].sum(-1).mean():.0%}")
for i in (T // 8, T // 2, T - 2):
    print(f"{half_tokens[i]} at {i} looks at", top_attended(far, half_tokens, i, 5))

# %% [markdown]
# An even spread would give the two [CLS]/[SEP] tokens under 1% of the weight.
# Heads that look far often park much of their attention there, or on
# punctuation: a place to put weight when the head has nothing to pass on
# (Clark et al., 2019, *What Does BERT Look At?*). The rest of their weight is
# spread thinly, which is also why such heads are hard to read in a heatmap.
# Change `layer, head` above to a head with a small distance and compare.

# %% [markdown] task="describe_a_head" points=2
# **Written answer.** Find a head in the model view or with your functions whose
# pattern you can describe (previous token, [SEP], the same word, ...). Name its
# layer and head, describe what it attends to, and give the evidence (numbers from
# `previous_token_heads` or `top_attended`, or what the views show).
#
# Write your answer in the cell below.
#
# === BEGIN MARK SCHEME ===
# **Model answer.** The answer depends on the head chosen; a full answer reads
# like this: "Layer *l*, head *h* attends to the previous token:
# `previous_token_heads(attentions, 0.5)` lists (*l*, *h*), and `top_attended` for
# the queries I tried returns the token just before each one; in the head view its
# lines run one step to the left." A [SEP]/[CLS] head, a same-word head or a
# next-token head described with such numbers is as good.
#
# **Rubric (2 points).**
#
# * 1 point: one head named by layer and head index, with a clear description of its
#   pattern (previous token, [SEP]/[CLS], the same word, the next token, broad, ...).
# * 1 point: evidence that supports it and that the grader can check: numbers from
#   `previous_token_heads` or `top_attended` (or the weights), or a precise
#   description of a view. Vague or contradicting evidence: 0 for this point.
# === END MARK SCHEME ===

# %% [markdown] open=true
# YOUR ANSWER HERE
