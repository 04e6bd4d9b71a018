"""course.checks.lessons: one lesson per exercise, turned off in the kernel by the
same declaration the grader reads."""

import importlib
import pkgutil
import random

import pytest
import torch

from course import checks
from course.checks import layer, lessons, softmax
from course.checks.calls import ShortcutUsed
from course.grading.steps.scan import lessons as scan_lessons


def test_softmax_s_lesson_blocks_every_route_and_restores_them():
    x = torch.randn(2, 3)
    routes = [
        lambda: torch.softmax(x, -1),
        lambda: torch.nn.functional.softmax(x, dim=-1),
        lambda: x.softmax(-1),
        lambda: torch.nn.Softmax(dim=-1)(x),
        lambda: torch.special.softmax(x, -1),
        lambda: x.log_softmax(-1).exp(),
        lambda: torch.nn.functional.softmin(-x, dim=-1),
    ]
    with softmax.LESSONS["softmax"].enforced((x, -1)):
        for route in routes:
            with pytest.raises(ShortcutUsed, match="by hand"):
                route()
    for route in routes:
        assert torch.allclose(route(), torch.softmax(x, -1))


def test_fused_attention_is_off_wherever_a_lesson_bans_it():
    q = torch.randn(1, 1, 3, 4)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    with softmax.LESSONS["softmax"].enforced():
        with pytest.raises(ShortcutUsed):
            torch.nn.functional.scaled_dot_product_attention(q, q, q)
        with pytest.raises(ShortcutUsed):
            torch.nn.MultiheadAttention(4, 1)(q[0], q[0], q[0])
    assert torch.nn.functional.scaled_dot_product_attention is sdpa
    assert "forward" in torch.nn.MultiheadAttention.__dict__


def test_whole_blocks_the_named_modules_of_the_arguments_only():
    model = checks.random_tiny_bert(random.Random(0))
    block = model.encoder.layer[0]
    h = torch.randn(1, 3, model.config.hidden_size)
    with layer.LESSONS["bert_layer"].enforced((h, block)):
        for module in (block, block.attention.self, block.output):
            with pytest.raises(ShortcutUsed):
                module(h)
        block.attention.self.query(h)  # the parts an answer is built from
        block.intermediate.dense(h)
    assert not any("forward" in m.__dict__ for m in block.modules())


def test_a_star_in_whole_reaches_every_layer():
    model = checks.random_tiny_bert(random.Random(1), fewest_layers=2)
    args = (None, None, model, None)
    with layer.LESSONS["bert_encoder"].enforced(args):
        blocked = [m for m in model.modules() if "forward" in m.__dict__]
    layers = model.encoder.layer
    assert len(layers) > 1
    assert {id(m) for m in blocked} >= {id(x.attention.self) for x in layers}
    assert {id(m) for m in blocked} >= {id(model), id(model.embeddings)}


def test_each_check_module_s_lessons_are_read_by_the_grader():
    """One declaration: a notebook module's LESSONS is what the scanner reads."""
    declared = {}
    for info in pkgutil.iter_modules(checks.__path__):
        module = importlib.import_module(f"course.checks.{info.name}")
        if isinstance(getattr(module, "LESSONS", None), dict):
            declared[module] = module.LESSONS
    assert set(declared) == set(scan_lessons.DECLARED_IN)
    merged = {k: v for found in declared.values() for k, v in found.items()}
    assert scan_lessons.LESSONS == merged
    assert sum(map(len, declared.values())) == len(merged)  # no exercise twice


def test_every_lesson_turns_something_off_in_the_kernel():
    for exercise, lesson in scan_lessons.LESSONS.items():
        found = [t for name in lesson.banned for t in lessons._library(name)]
        assert found or lesson.whole, exercise
