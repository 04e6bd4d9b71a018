"""Checks for 01_config: the config, the parameter count, where weights live."""

from __future__ import annotations

import random

import torch
from transformers import BertConfig, BertModel

from .. import models
from ..hints import hint as hint  # the notebook's check.hint("<exercise>")
from ..i18n import N_, say
from ..worked import worked as worked  # check.worked("<exercise>"), once tried
from . import call, equal, expect_close, expect_equal, fail
from .calls import CaseVerdicts, private

KEYS = (
    "num_layers",
    "num_heads",
    "hidden_size",
    "head_size",
    "intermediate_size",
    "vocab_size",
    "max_positions",
)


def _config_truth(c) -> dict:
    """What each key means, read off the config's own attribute names."""
    return {
        "num_layers": c.num_hidden_layers,
        "num_heads": c.num_attention_heads,
        "hidden_size": c.hidden_size,
        "head_size": c.hidden_size // c.num_attention_heads,
        "intermediate_size": c.intermediate_size,
        "vocab_size": c.vocab_size,
        "max_positions": c.max_position_embeddings,
    }


def _random_configs(seed: int, n: int = 6):
    rng = random.Random(seed)
    for _ in range(n):
        heads = rng.choice([1, 2, 3, 5, 6, 8, 16])
        d = rng.choice([4, 7, 16, 24, 48, 80])
        yield BertConfig(
            vocab_size=rng.randint(50, 5000),
            hidden_size=heads * d,
            num_hidden_layers=rng.randint(1, 24),
            num_attention_heads=heads,
            intermediate_size=rng.choice([3, 4]) * heads * d + rng.randint(0, 9),
            max_position_embeddings=rng.choice([16, 128, 333, 1024]),
        )


def _described(fn, config) -> dict:
    """Call describe_config; fail unless it gives a dict with every key."""
    got = call(fn, config, name="describe_config")
    if not isinstance(got, dict):
        fail(
            "describe_config should return a dict, but it returned {type_name}.",
            type_name=type(got).__name__,
        )
    missing = [k for k in KEYS if k not in got]
    if missing:
        fail("describe_config's dict is missing the key(s) {missing}.", missing=missing)
    return got


def _check_description(fn, config) -> None:
    got = _described(fn, config)
    truth = _config_truth(config)
    if (
        got["num_heads"] == truth["hidden_size"]
        and got["hidden_size"] == truth["num_heads"]
    ):
        fail(
            "num_heads and hidden_size are swapped: hidden_size is D, num_heads is H.",
            mistake="heads-hidden-swapped",
        )
    for key in KEYS:
        value = got[key]
        if isinstance(value, bool) or not isinstance(value, int):
            fail(
                "describe_config's {key!r} should be an int, but it is {value!r}.",
                key=key,
                value=value,
            )
        if key == "head_size" and value != truth[key] and value in (32, 64):
            fail(
                "head_size is {value} for a config with hidden_size "
                "{hidden_size} and {num_attention_heads} heads: it looks "
                "hard-coded. Derive it: D // H.",
                value=value,
                hidden_size=config.hidden_size,
                num_attention_heads=config.num_attention_heads,
            )
        expect_equal(value, truth[key], f"describe_config(config)[{key!r}]")


def describe_config_keys(fn) -> None:
    """The result is a dict with the seven keys, each an int."""
    got = _described(fn, models.oracle_model().config)
    bad = [k for k in KEYS if isinstance(got[k], bool) or not isinstance(got[k], int)]
    if bad:
        fail("These values should be Python ints: {bad}.", bad=bad)


def describe_config_course_model(fn) -> None:
    """The values match the course model's config."""
    _check_description(fn, models.oracle_model().config)


def describe_config_random(fn, seed: int) -> None:
    """The values match configs of other sizes (nothing hard-coded)."""
    verdicts = CaseVerdicts()
    for config in _random_configs(seed):
        with verdicts:
            _check_description(fn, config)
    verdicts.fail_if_any()


TENSORS = N_(
    "On {what} you counted {got}, the number of parameter tensors (weights "
    "and biases, each one entry), not of the numbers they hold: add up "
    "p.numel() over model.parameters().",
    mistake="tensors",
)


def _tensor_counts(model) -> set[int]:
    """How many parameter tensors (or state_dict entries) ``model`` has, counted
    each way a loop over them could: the misconception's answers."""
    return {
        len(list(model.parameters())),
        len(list(model.named_parameters(remove_duplicate=False))),
        len(model.state_dict()),
        len(list(model.buffers())) + len(list(model.parameters())),
    }


def bert_parameter_count(c) -> int:
    """Parameters of a BertModel with pooler, from its config alone (the oracle)."""
    D, inner = c.hidden_size, c.intermediate_size
    embeddings = (
        c.vocab_size + c.max_position_embeddings + c.type_vocab_size
    ) * D + 2 * D
    attention = 4 * (D * D + D) + 2 * D
    feed_forward = (D * inner + inner) + (inner * D + D) + 2 * D
    pooler = D * D + D
    return embeddings + c.num_hidden_layers * (attention + feed_forward) + pooler


def _expect_count(fn, model, truth: int, what: str) -> None:
    got = call(fn, model, name="count_parameters")
    if isinstance(got, torch.Tensor) and got.numel() == 1:
        fail("count_parameters should return a Python int: use int(...) or .item().")
    if isinstance(got, bool) or not isinstance(got, int):
        fail(
            "count_parameters should return an int, but it returned {type_name}.",
            type_name=type(got).__name__,
        )
    if got != truth and got in _tensor_counts(model):
        fail(TENSORS, what=what, got=got)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if got == trainable and got != truth:
        fail(
            "On {what} you counted only trainable parameters; frozen ones count too.",
            mistake="trainable",
            what=what,
        )
    buffers = sum(b.numel() for b in model.buffers())
    if buffers and got == truth + buffers:
        fail(
            "On {what} you counted buffers (such as position_ids); they "
            "are not parameters.",
            what=what,
        )
    if got > truth:
        fail(
            "On {what} you counted {got} but it has {truth}: a weight "
            "shared by two modules (tied weights) is one parameter and "
            "counts once.",
            what=what,
            got=got,
            truth=truth,
        )
    expect_equal(got, truth, say("count_parameters on {what}", what=what))


def count_parameters_course_model(fn) -> None:
    """The count matches the course model (computed from its config)."""
    model = models.oracle_model()
    _expect_count(
        fn, model, bert_parameter_count(model.config), say("the course model")
    )


def count_parameters_random(fn, seed: int) -> None:
    """Counts on other BERT sizes, a partly frozen model and one with tied weights."""
    verdicts = CaseVerdicts()
    for i, config in enumerate(_random_configs(seed, n=2)):
        with verdicts:
            config.num_hidden_layers = 1 + i
            config.vocab_size = 60
            model = BertModel(config)
            _expect_count(
                fn, model, bert_parameter_count(config), say("a BERT of another size")
            )
    with verdicts:
        torch.manual_seed(seed)
    frozen = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Linear(7, 3))
    with verdicts:
        frozen[0].requires_grad_(False)
    with verdicts:
        _expect_count(
            fn, frozen, (5 * 7 + 7) + (7 * 3 + 3), say("a model with a frozen layer")
        )
    tied = torch.nn.Sequential(
        torch.nn.Embedding(11, 6), torch.nn.Linear(6, 11, bias=False)
    )
    tied[1].weight = tied[0].weight
    with verdicts:
        _expect_count(
            fn, tied, 11 * 6, say("a model whose output layer shares the embedding")
        )
    verdicts.fail_if_any()


def _expect_query(fn, model, index: int) -> None:
    # The very module object is asked for, so the answer gets the model itself, not
    # a copy (a copy of the oracle here); what the layers hold is read before the
    # call, which may change them.
    model = private(model)
    layers = [layer.attention.self for layer in model.encoder.layer]
    queries = [self_attn.query for self_attn in layers]
    query, key, value = queries[index], layers[index].key, layers[index].value
    weight = query.weight.detach().clone()
    got = call(fn, model, index, name="query_linear", share=True)
    if got is query and equal(query.weight, weight):
        return
    if got is query:
        fail(
            "query_linear changed the weights of the query projection it "
            "returned; return the module as it is."
        )
    if isinstance(got, torch.Tensor):
        fail(
            "query_linear should return the nn.Linear module itself, not "
            "a weight tensor."
        )
    if not isinstance(got, torch.nn.Linear):
        fail(
            "query_linear should return an nn.Linear, but returned {type_name}.",
            type_name=type(got).__name__,
        )
    if got is key or got is value:
        which = "key" if got is key else "value"
        fail(
            "query_linear returned layer {index}'s {which} projection, not its query.",
            index=index,
            which=which,
        )
    for i, other in enumerate(queries):
        if got is other:
            fail(
                "query_linear(model, {index}) returned layer {i}'s "
                "query: layers count from 0.",
                mistake="layer-off-by-one",
                index=index,
                i=i,
            )
    if equal(got.weight, weight):
        fail(
            "query_linear returned a copy of the query projection. "
            "Return the very module object (so that changing it changes "
            "the model).",
            mistake="copy",
        )
    fail(
        "query_linear(model, {index}) is not layer {index}'s query projection.",
        index=index,
    )


def query_linear_first_layer(fn) -> None:
    """query_linear(model, 0) is the course model's layer-0 query module itself."""
    _expect_query(fn, models.oracle_model(), 0)


def query_linear_random(fn, seed: int) -> None:
    """Every layer of BERTs with other depths."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    for _ in range(2):
        with verdicts:
            model = models.tiny_bert(
                seed=rng.randint(0, 999), num_layers=rng.randint(2, 5)
            )
            for index in range(model.config.num_hidden_layers):
                _expect_query(fn, model, index)
    verdicts.fail_if_any()


# --- with_max_positions: a new model, the change made through the config --------------


def _outputs(model, input_ids):
    with torch.no_grad():
        return model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids))


def _expect_resized(fn, model, max_len: int, seed: int, compare: bool) -> None:
    # Whether the original is left as it was is the question, so the answer gets
    # it, not a copy; everything the verdict compares with is taken before.
    before = {k: v.clone() for k, v in model.state_dict().items()}
    old_rows = model.config.max_position_embeddings
    gen = torch.Generator().manual_seed(seed)
    lengths = (1, max_len // 2 + 1, max_len) if compare else ()
    inputs = [
        torch.randint(1, model.config.vocab_size, (2, n), generator=gen)
        for n in lengths
    ]
    wants = [_outputs(model, ids).last_hidden_state for ids in inputs]
    new = call(fn, model, max_len, name="with_max_positions", share=True)
    for k, v in model.state_dict().items():
        if k not in before or v.shape != before[k].shape or not equal(v, before[k]):
            fail(
                "with_max_positions changed the original model; build a "
                "new one instead."
            )
    if model.config.max_position_embeddings != old_rows:
        fail(
            "with_max_positions changed the original model's config; copy it first.",
            mistake="changed-config",
        )
    if new is model:
        fail(
            "with_max_positions returned the original model; it should "
            "return a new one.",
            mistake="same-model",
        )
    if type(new) is not type(model):
        fail(
            "with_max_positions should return a {want}, not {got}.",
            want=type(model).__name__,
            got=type(new).__name__,
        )
    rows = new.embeddings.position_embeddings.weight.shape[0]
    if rows != max_len:
        fail(
            "The new position embedding has {rows} rows; it should have {max_len}.",
            rows=rows,
            max_len=max_len,
        )
    if new.config.max_position_embeddings != max_len:
        fail(
            "The embedding was resized but "
            "new.config.max_position_embeddings is "
            "{max_position_embeddings}: the structural change goes "
            "through the config, so the config must say the new size.",
            max_position_embeddings=new.config.max_position_embeddings,
        )
    for ids, want in zip(inputs, wants, strict=True):
        expect_close(
            _outputs(new.eval(), ids).last_hidden_state,
            want,
            say(
                "the new model's last_hidden_state on {length} tokens",
                length=ids.shape[1],
            ),
            diagnose={},
            what=say("the original model's (were all weights copied?)"),
        )


def _small_bert():
    # A small BERT rather than a copy of the course model: the answer copies what
    # it is given, and two more copies of the course model would double the
    # grading kernel's memory. The notebook itself runs it on the course model.
    return models.tiny_bert(seed=3, num_layers=2, num_heads=4, max_positions=128)


def with_max_positions_structure(fn) -> None:
    """A new model whose config and position embedding have max_len rows."""
    _expect_resized(fn, _small_bert(), 40, seed=0, compare=False)


def with_max_positions_outputs(fn) -> None:
    """On short inputs the new model's outputs equal the original's."""
    _expect_resized(fn, _small_bert(), 40, seed=0, compare=True)


def with_max_positions_random(fn, seed: int) -> None:
    """Other model sizes and lengths: weights copied, original untouched."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    for _ in range(3):
        with verdicts:
            model = models.tiny_bert(
                seed=rng.randint(0, 999),
                num_layers=rng.randint(1, 3),
                num_heads=rng.choice([2, 3, 4]),
                max_positions=rng.choice([32, 48]),
            )
            _expect_resized(fn, model, rng.randint(5, 20), seed=seed, compare=True)
    verdicts.fail_if_any()
