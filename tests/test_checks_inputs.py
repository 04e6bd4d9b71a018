"""course.checks.inputs: the random inputs the hidden checks draw keep the promises
that make a forgotten mask or a LayerNorm mistake show on every seed."""

import random

import pytest
import torch

from course.checks import inputs


@pytest.mark.parametrize("seed", range(20))
def test_a_random_batch_has_one_full_row_and_padded_others(seed):
    ids, types, mask = inputs.random_batch(random.Random(seed), token_types=True)
    B, T = ids.shape
    assert 2 <= B <= 3 and 2 <= T <= 9
    assert types.shape == (B, T) and set(types.unique().tolist()) <= {0, 1}
    assert mask[0].all() and (mask[1:].sum(-1) < T).all() and (mask[:, 0] == 1).all()
    lengths = mask.sum(-1)
    assert torch.equal(mask, (torch.arange(T) < lengths[:, None]).long())  # no holes
    assert ids.min() >= 1  # 0 is [PAD]: a drawn token never reads as padding


@pytest.mark.parametrize("seed", range(12))
def test_a_random_tiny_bert_is_wide_enough_to_show_mistakes(seed):
    bert = inputs.random_tiny_bert(random.Random(seed), fewest_layers=2)
    config = bert.config
    assert config.hidden_size >= 4 and 2 <= config.num_hidden_layers <= 3
    assert config.hidden_size % config.num_attention_heads == 0
    assert config._attn_implementation == "eager"  # its attentions are returned


def test_the_sample_texts_are_two():
    """Visible tests run a second text, so numbers fitted to the first fail."""
    assert len(set(inputs.SAMPLE_TEXTS)) == 2
