# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 · Config, model, and where the weights live
#
# Before we compute attention by hand we need to know the machine we are taking
# apart. A BERT model is two things:
#
# * a **config** (`BertConfig`): a handful of integers that fix every shape —
#   how many layers, how many heads, how wide the hidden vectors are;
# * a **state dict**: the learned numbers, one tensor per weight, whose shapes
#   follow from the config.
#
# The course runs offline on a small pretrained BERT that ships with it (MiniLM:
# 6 layers, 12 heads, hidden size 384). The BERT of most tutorials,
# bert-base-uncased, has 12 layers, 12 heads and hidden size 768; everything you
# write here must work for both, so **never type a size — read it from the config**.
#
# Notation used in the whole course: B batch, T tokens, D hidden size, H heads,
# d = D // H head size, L layers.

# %%

from course import models
from course.checks import config as check

model, tokenizer = models.load()
config = model.config
print(type(model).__name__, "with", config.num_hidden_layers, "layers")

# %% [markdown]
# ## 1. What the config holds
#
# `config` is a `BertConfig`. Print it and find the attribute names of each size.
# Note that the head size is *not* stored: BERT splits the hidden vector of size D
# into H equal pieces, so d = D // H.

# %%
print(config)

# %% [markdown]
# **Exercise 1.** Write `describe_config(config)` returning a dict with the keys
# `num_layers`, `num_heads`, `hidden_size`, `head_size`, `intermediate_size`,
# `vocab_size`, `max_positions`, each a Python `int`.


# %% answer="describe_config"
def describe_config(config):
    """Summarise a BertConfig as a dict of seven ints."""
    ### BEGIN SOLUTION
    return {
        "num_layers": config.num_hidden_layers,
        "num_heads": config.num_attention_heads,
        "hidden_size": config.hidden_size,
        "head_size": config.hidden_size // config.num_attention_heads,
        "intermediate_size": config.intermediate_size,
        "vocab_size": config.vocab_size,
        "max_positions": config.max_position_embeddings,
    }
    ### END SOLUTION


# %%
# Check yourself
describe_config(config)

# %% test="test_describe_config_keys" points=1
"""describe_config returns a dict with the seven keys, each an int."""
check.describe_config_keys(describe_config)

# %% test="test_describe_config_values" points=1
"""describe_config's values match the course model's config."""
check.describe_config_course_model(describe_config)

# %% test="test_describe_config_random" points=2
"""describe_config is right for configs of other sizes (nothing hard-coded)."""
### BEGIN HIDDEN TESTS
check.describe_config_random(describe_config, seed=1107)
### END HIDDEN TESTS

# %% [markdown]
# ## 2. Counting parameters
#
# `model.parameters()` yields every learned tensor once, even when two modules
# share one (tied weights). Frozen parameters (`requires_grad=False`) are still
# parameters; buffers such as `position_ids` are not.

# %% [markdown]
# **Exercise 2.** Write `count_parameters(model)` returning the number of scalar
# parameters of any `nn.Module`, as an `int`.


# %% answer="count_parameters"
def count_parameters(model):
    """Number of scalar parameters in `model` (shared ones once)."""
    ### BEGIN SOLUTION
    return sum(p.numel() for p in model.parameters())
    ### END SOLUTION


# %%
print(f"{count_parameters(model):,} parameters")

# %% test="test_count_parameters_model" points=1
"""count_parameters matches the course model's size."""
check.count_parameters_course_model(count_parameters)

# %% test="test_count_parameters_random" points=2
"""count_parameters is right for other sizes, frozen layers and tied weights."""
### BEGIN HIDDEN TESTS
check.count_parameters_random(count_parameters, seed=2203)
### END HIDDEN TESTS

# %% [markdown]
# ## 3. Where the weights live
#
# Print `model` to see the module tree. Layer i of the encoder is
# `model.encoder.layer[i]`; its self-attention has three projections, `query`,
# `key` and `value`, each an `nn.Linear(D, D)`. All heads share these three
# matrices: a head is a slice of them (notebook 03).

# %%
print(model.encoder.layer[0].attention)

# %% [markdown]
# **Exercise 3.** Write `query_linear(model, layer_index)` returning the query
# projection of that layer — the module object itself, not a copy and not its
# weight.


# %% answer="query_linear"
def query_linear(model, layer_index):
    """The nn.Linear that computes the queries of layer `layer_index`."""
    ### BEGIN SOLUTION
    return model.encoder.layer[layer_index].attention.self.query
    ### END SOLUTION


# %%
q = query_linear(model, 0)
print(q, tuple(q.weight.shape), tuple(q.bias.shape))

# %% test="test_query_linear_first" points=1
"""query_linear(model, 0) is layer 0's query module itself."""
check.query_linear_first_layer(query_linear)

# %% test="test_query_linear_random" points=1
"""query_linear finds every layer of BERTs with other depths."""
### BEGIN HIDDEN TESTS
check.query_linear_random(query_linear, seed=3301)
### END HIDDEN TESTS

# %% [markdown]
# `nn.Linear(in_features, out_features)` stores `weight` as **(out_features,
# in_features)** and computes `y = x @ weight.T + bias`. For the query projection
# both are D, so the shape alone does not tell you which is which — but it
# matters in notebook 03, where one head's weights are a block of **rows**.

# %% [markdown] task="why_out_in" points=2
# **Written answer.** Why does PyTorch store `linear.weight` as (out_features,
# in_features)? Say what each row of the weight is for one output feature, and
# what that means for taking out the rows that belong to one attention head.
#
# Write your answer in the cell below.
#
# === BEGIN MARK SCHEME ===
# **Model answer.** Each row of `weight` holds the weights of one output feature:
# output j is `weight[j] @ x + bias[j]`, row j's dot product with the input, so
# `y = x @ weight.T + bias` (the matrix convention y = Wx). The query projection's
# outputs are the H heads' features laid end to end: head h owns outputs
# h·d … (h+1)·d − 1, so its weights are the rows `h*d:(h+1)*d` (every column) and
# its bias `bias[h*d:(h+1)*d]`. Columns are input features: a block of columns
# mixes every head.
#
# **Rubric (2 points).**
#
# * 1 point: each row is one output feature's weights (output j = row j · x + b_j, y =
#   x Wᵀ + b).
# * 1 point: a head is d consecutive output features, so its weights are the rows h·d
#   to (h+1)·d (and the same slice of the bias), not columns.
# === END MARK SCHEME ===

# %% [markdown] open=true
# YOUR ANSWER HERE

# %% [markdown]
# ## 4. Structural changes go through the config
#
# The position embedding is a table with `max_position_embeddings` rows: one
# learned vector per position. Cutting it to fewer rows is a change of
# *structure*: if only the tensor changes, the config still says the old size and
# any code that builds or saves the model from its config disagrees with it. So:
# copy the config, change it, build a new model from it, copy the weights over.
#
# Why shrink it? A model is only defined up to `max_position_embeddings` tokens
# (512 for bert-base); a smaller table is a smaller model to store and to serve
# when your texts are short, and it is the same edit, the other way round, as
# *growing* it for longer texts (new rows must then be learned).
#
# Two traps on the way:
#
# * `new.load_state_dict(model.state_dict())` fails with a *size mismatch* for
#   `embeddings.position_embeddings.weight`: the old table has more rows than the
#   new model's. Slice it to its first `max_len` rows first; every other weight
#   has the same shape. (The `position_ids` buffer is (1,
#   `max_position_embeddings`): where a state dict holds it, slice its *columns*,
#   `[:, :max_len]`. transformers 5 does not save it; the new model makes its own.)
# * `BertModel(config).from_pretrained(name)` (a line found in many blog posts)
#   does **not** use your edited config: `from_pretrained` is a *classmethod*, so
#   it builds a fresh model from the saved config and the instance you made is
#   thrown away. Passing the config, `BertModel.from_pretrained(name,
#   config=config)`, does not slice either: transformers 5 stops with a size
#   mismatch for the position table, and with `ignore_mismatched_sizes=True` it
#   loads every other weight but fills the table with *random* values. So build
#   the model and load the sliced weights yourself, as here.

# %% [markdown]
# **Exercise 4.** Write `with_max_positions(model, max_len)` returning a **new**
# model of the same class whose position embedding has `max_len` rows, with every
# weight copied; the original model must not change. On inputs of at most
# `max_len` tokens its outputs equal the original's.

# %% answer="with_max_positions"
import copy


def with_max_positions(model, max_len):
    """A copy of `model` whose position embedding has `max_len` rows."""
    ### BEGIN SOLUTION
    new_config = copy.deepcopy(model.config)
    new_config.max_position_embeddings = max_len
    new = type(model)(new_config)
    state = dict(model.state_dict())
    for key, value in state.items():
        if "position" in key and value.shape[0] == model.config.max_position_embeddings:
            state[key] = value[:max_len].clone()
    new.load_state_dict(state, strict=False)
    return new.eval()
    ### END SOLUTION


# %%
short = with_max_positions(model, 32)
print(short.embeddings.position_embeddings)

# %% test="test_with_max_positions_structure" points=1
"""with_max_positions returns a new model with max_len positions in config and table."""
check.with_max_positions_structure(with_max_positions)

# %% test="test_with_max_positions_outputs" points=1
"""The new model's outputs equal the original's on short inputs."""
check.with_max_positions_outputs(with_max_positions)

# %% test="test_with_max_positions_random" points=2
"""with_max_positions works on other models and lengths and leaves the original alone."""
### BEGIN HIDDEN TESTS
check.with_max_positions_random(with_max_positions, seed=4409)
### END HIDDEN TESTS
