"""Checks for 01_config, its last exercise: ``with_max_positions``, a new model whose
position embedding has another number of rows (the change made through the
config), its weights copied and the original left as it was.
"""

from __future__ import annotations

import random

import torch

from .. import models
from ..i18n import say
from . import call, equal, expect_close, fail


def _outputs(model, input_ids):
    with torch.no_grad():
        return model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids))


def _expect_resized(fn, model, max_len: int, seed: int, compare: bool) -> None:
    before = {k: v.clone() for k, v in model.state_dict().items()}
    old_rows = model.config.max_position_embeddings
    new = call(fn, model, max_len, name="with_max_positions")
    for k, v in model.state_dict().items():
        if k not in before or v.shape != before[k].shape or not equal(v, before[k]):
            fail(
                "with_max_positions changed the original model; build a "
                "new one instead."
            )
    if model.config.max_position_embeddings != old_rows:
        fail("with_max_positions changed the original model's config; copy it first.")
    if new is model:
        fail(
            "with_max_positions returned the original model; it should "
            "return a new one."
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
    if not compare:
        return
    gen = torch.Generator().manual_seed(seed)
    for length in (1, max_len // 2 + 1, max_len):
        ids = torch.randint(1, model.config.vocab_size, (2, length), generator=gen)
        want, got = _outputs(model, ids), _outputs(new.eval(), ids)
        expect_close(
            got.last_hidden_state,
            want.last_hidden_state,
            say("the new model's last_hidden_state on {length} tokens", length=length),
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
    rng = random.Random(seed)
    for _ in range(3):
        model = models.tiny_bert(
            seed=rng.randint(0, 999),
            num_layers=rng.randint(1, 3),
            num_heads=rng.choice([2, 3, 4]),
            max_positions=rng.choice([32, 48]),
        )
        _expect_resized(fn, model, rng.randint(5, 20), seed=seed, compare=True)
