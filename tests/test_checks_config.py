"""course.checks.config against right and wrong answers written here."""

import copy

import pytest
import torch

from course.checks import CheckFailed
from course.checks import config as check


def describe(config):
    c = config
    return {
        "num_layers": c.num_hidden_layers,
        "num_heads": c.num_attention_heads,
        "hidden_size": c.hidden_size,
        "head_size": c.hidden_size // c.num_attention_heads,
        "intermediate_size": c.intermediate_size,
        "vocab_size": c.vocab_size,
        "max_positions": c.max_position_embeddings,
    }


def test_describe_config_checks_pass_a_right_answer():
    check.describe_config_keys(describe)
    check.describe_config_course_model(describe)
    check.describe_config_random(describe, seed=5)


def test_describe_config_random_catches_a_hard_coded_head_size():
    def hard_coded(config):
        return {**describe(config), "head_size": 64}

    with pytest.raises(CheckFailed, match="hard-coded"):
        check.describe_config_random(hard_coded, seed=5)


def test_parameter_formula_agrees_with_torch_on_random_configs():
    from transformers import BertModel

    for config in check._random_configs(seed=9, n=3):
        config.num_hidden_layers, config.vocab_size = 1, 40
        model = BertModel(config)
        assert check.bert_parameter_count(config) == sum(
            p.numel() for p in model.parameters()
        )


def test_count_parameters_checks():
    def right(model):
        return sum(p.numel() for p in model.parameters())

    check.count_parameters_course_model(right)
    check.count_parameters_random(right, seed=1)
    with pytest.raises(CheckFailed, match="Python int"):
        check.count_parameters_course_model(lambda m: torch.tensor(right(m)))


def test_query_linear_checks():
    check.query_linear_random(
        lambda m, i: m.encoder.layer[i].attention.self.query, seed=2
    )
    with pytest.raises(CheckFailed, match="a copy"):
        check.query_linear_first_layer(
            lambda m, i: copy.deepcopy(m.encoder.layer[i].attention.self.query)
        )
    with pytest.raises(CheckFailed, match="value projection"):
        check.query_linear_first_layer(
            lambda m, i: m.encoder.layer[i].attention.self.value
        )
