"""course.checks.outputs: notebook 02's checks (tokenizer batches, output shapes,
the pooler, bertviz's neuron-view keys), called directly with answers written here."""

import random

import pytest
import torch

from course import models
from course.checks import CheckFailed
from course.checks import outputs as check


def _encode(tokenizer, texts, max_length):
    return tokenizer(
        texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt"
    )


def _shapes(config, B, T):
    """The shapes written from the config alone: D = H * d, L layers."""
    per_token = (B, T, config.hidden_size)
    return dict(
        last_hidden_state=per_token,
        pooler_output=(B, config.hidden_size),
        hidden_states=per_token,  # one per layer and one for the embeddings
        num_hidden_states=config.num_hidden_layers + 1,
        attentions=(B, config.num_attention_heads, T, T),
        num_attentions=config.num_hidden_layers,
    )


def _pooler(model, hidden):
    return torch.tanh(model.pooler.dense(hidden[:, 0]))


def test_random_texts_are_made_of_the_words():
    """The random texts hold 1 to 14 of WORDS each, the same ones for a seed."""
    texts = check._random_texts(random.Random(4), 30)
    assert texts == check._random_texts(random.Random(4), 30)
    assert texts != check._random_texts(random.Random(5), 30)
    for text in texts:
        words = text.split(" ")
        assert 1 <= len(words) <= 14 and set(words) <= set(check.WORDS)


def test_true_shapes_are_what_the_config_says():
    """The shapes read off a model's outputs are the ones written from its config,
    for two sizes of model."""
    for heads, size, layers in ((3, 2, 1), (2, 8, 3)):
        model = models.tiny_bert(
            seed=1, num_layers=layers, num_heads=heads, head_size=size
        )
        assert check._true_shapes(model, 2, 5) == _shapes(model.config, 2, 5)


def test_output_shapes_passes_the_config_formula_and_names_two_mistakes():
    """A dict built from the config passes; D where H goes in attentions, and L
    hidden states, are each named with their key."""
    check.output_shapes_random(_shapes, seed=3)

    def attentions_d(config, B, T):
        D = config.hidden_size
        return {**_shapes(config, B, T), "attentions": (B, D, T, T)}

    def no_embeddings(config, B, T):
        out = _shapes(config, B, T)
        return {**out, "num_hidden_states": out["num_hidden_states"] - 1}

    with pytest.raises(CheckFailed, match="one \\(T, T\\) map per head") as err:
        check.output_shapes_random(attentions_d, seed=3)
    assert "attentions-d" in err.value.mistakes
    with pytest.raises(CheckFailed, match="L \\+ 1") as err:
        check.output_shapes_random(no_embeddings, seed=3)
    assert "count" in err.value.mistakes


def test_output_shapes_says_a_missing_key():
    """A dict without pooler_output fails naming that key; a list is no dict."""
    with pytest.raises(CheckFailed, match="pooler_output"):
        check.output_shapes_random(
            lambda c, B, T: {
                k: v for k, v in _shapes(c, B, T).items() if k != "pooler_output"
            },
            seed=0,
        )
    with pytest.raises(CheckFailed, match="should return a dict"):
        check.output_shapes_random(lambda c, B, T: list(_shapes(c, B, T)), seed=0)


@pytest.mark.parametrize(
    ("wrong", "key"),
    [
        (lambda model, h: model.pooler.dense(h[:, 0]), "no-tanh"),
        (lambda model, h: torch.tanh(model.pooler.dense(h.mean(1))), "mean"),
        (lambda model, h: torch.tanh(model.pooler.dense(h[:, -1])), "last-token"),
    ],
)
def test_pooler_names_each_mistake_and_passes_tanh_dense_cls(wrong, key):
    """tanh(dense(h[:, 0])) passes; no tanh, the mean token and the last token are
    each named with their key."""
    check.pooler_random(_pooler, seed=2)
    with pytest.raises(CheckFailed) as err:
        check.pooler_random(wrong, seed=2)
    assert key in err.value.mistakes


def test_pooler_by_the_module_itself_is_the_shortcut():
    """Calling model.pooler is turned off while the answer runs (the lesson); the
    same numbers by hand pass."""
    with pytest.raises(CheckFailed, match="calling model.pooler"):
        check.pooler_random(lambda model, h: model.pooler(h), seed=2)
    check.pooler_random(_pooler, seed=2)


def test_encode_passes_a_padded_truncated_batch():
    """The tokenizer asked to pad to the longest, truncate and give tensors passes
    the fixed batches and random ones."""
    check.encode_types(_encode)
    check.encode_truncates(_encode)
    check.encode_random(_encode, seed=5)


def test_encode_names_lists_and_max_length_padding():
    """Lists instead of tensors, and padding to max_length, are named with their
    keys; a missing truncation says truncate."""
    with pytest.raises(CheckFailed, match="return_tensors='pt'") as err:
        check.encode_types(
            lambda tok, texts, n: tok(
                texts, padding=True, truncation=True, max_length=n
            )
        )
    assert err.value.mistakes == ("lists",)

    def to_max_length(tok, texts, n):
        return tok(
            texts,
            padding="max_length",
            truncation=True,
            max_length=n,
            return_tensors="pt",
        )

    with pytest.raises(CheckFailed, match="padded to max_length") as err:
        check.encode_types(to_max_length)
    assert err.value.mistakes == ("max-padding",)
    with pytest.raises(CheckFailed, match="truncate"):
        check.encode_truncates(
            lambda tok, texts, n: tok(texts, padding=True, return_tensors="pt")
        )


def test_neuron_view_keys_are_read_off_the_output():
    """The keys of one layer's entry pass in any order; another list fails."""
    check.neuron_view_keys_random(lambda out: sorted(out[-1][0], reverse=True), 1)
    with pytest.raises(CheckFailed, match="other keys"):
        check.neuron_view_keys_random(lambda out: ["attn", "queries"], 1)
    with pytest.raises(CheckFailed, match="list of str"):
        check.neuron_view_keys_random(lambda out: "attn queries keys", 1)
