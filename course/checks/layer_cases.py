"""What the checks of 07_full_layer compare against and say: the model's own
values for one layer and batch (:class:`Case`, made once per input and process),
the misconceptions they name, and a call made twice to catch active dropout.
"""

from __future__ import annotations

import functools
import random

import torch
import torch.nn.functional as F

from .. import data, models
from ..i18n import N_
from . import call, equal, fail, random_batch, random_tiny_bert
from .oracles import own_copy

BY_HAND = N_(
    "Build it from its parts (Linear, LayerNorm, Embedding modules): calling "
    "the block itself is the shortcut this exercise turns off."
)
PRE_LN = N_(
    "pre-LN instead of post-LN: BERT normalises after adding the residual, "
    "LayerNorm(x + sublayer(x))."
)
AFTER_LN = N_(
    "the residual was added after LayerNorm; BERT computes LayerNorm(x + sublayer(x))."
)
NO_RESIDUAL = N_("the residual connection is missing: LayerNorm(x + sublayer(x)).")
FF_RESIDUAL = N_(
    "the feed-forward's residual connection is missing: the layer ends with "
    "LayerNorm(a + FF(a)), where a is the attention block's output, not "
    "LayerNorm(FF(a))."
)
RELU = N_("ReLU instead of GELU: BERT's feed-forward uses GELU.")
TANH_GELU = N_(
    "the tanh approximation of GELU; BERT's 'gelu' is the exact erf form "
    "(F.gelu(x) with its default)."
)
DROPOUT = N_(
    "the result changes from one call to the next: dropout is active. At "
    "inference dropout is off (eval mode, or training=False)."
)
# Dropout on a tiny tensor often drops nothing, twice: what is left is its 1/(1 - p).
SCALED = N_(
    "the sublayer's output is scaled by 1/(1 - p): dropout is active (this "
    "time it dropped nothing, but still rescaled). At inference dropout is "
    "off (eval mode, or training=False)."
)


def blocked(*modules) -> list:
    """The modules' ``forward`` and fused attention: what an answer may not call."""
    return [(m, "forward") for m in modules] + [(F, "scaled_dot_product_attention")]


class Case:
    """The model's own intermediate values for one layer and batch."""

    def __init__(self, model, layer: int, ids, types, mask):
        self.model, self.ids, self.types, self.mask = model, ids, types, mask
        self.layer = model.encoder.layer[layer]
        seen = {}

        def keep(_m, _i, output) -> None:
            seen["attn"] = output[0] if isinstance(output, tuple) else output

        hook = self.layer.attention.register_forward_hook(keep)
        with torch.no_grad():
            out = model(input_ids=ids, token_type_ids=types, attention_mask=mask)
        hook.remove()
        self.states = out.hidden_states
        self.hidden, self.after = out.hidden_states[layer], out.hidden_states[layer + 1]
        self.attn_out = seen["attn"]  # (B, T, D): after the attention block
        self.ext = (1.0 - mask[:, None, None, :].float()) * torch.finfo(
            torch.float32
        ).min

    def context(self, x):
        """Self-attention context (before the output dense) of input x."""
        with torch.no_grad():
            out = self.layer.attention.self(x, attention_mask=self.ext)
        return out[0] if isinstance(out, tuple) else out


# Unpadded visible tests run on the sentence pair (token types 0 and 1), then on the
# sample text, so that an answer fitted to one input cannot pass them.
UNPADDED = (data.SENTENCE_PAIR, (data.SAMPLE_TEXT,))


def course_case(padded: bool = False, layer: int = 2, texts=data.SENTENCE_PAIR) -> Case:
    """The course model at ``layer`` on ``texts`` (or a padded batch); the model
    runs once per input and process, each caller gets its own tensors."""
    return own_copy(_course_case(padded, layer, tuple(texts)))


@functools.lru_cache(maxsize=8)
def _course_case(padded: bool, layer: int, texts: tuple) -> Case:
    tok = models.load_tokenizer()
    if padded:
        enc = tok([data.SAMPLE_TEXT, "A short one."], padding=True, return_tensors="pt")
    else:
        enc = tok(*texts, return_tensors="pt")
    return Case(
        models.oracle_model(),
        layer,
        enc["input_ids"],
        enc["token_type_ids"],
        enc["attention_mask"],
    )


def random_cases(seed: int, n: int = 3):
    rng = random.Random(seed)
    for _ in range(n):
        model = random_tiny_bert(rng, heads=(1, 2, 4))
        ids, types, mask = random_batch(rng, token_types=True)
        yield Case(
            model, rng.randrange(model.config.num_hidden_layers), ids, types, mask
        )


def twice(fn, args, name):
    """``fn(*args)``, called again to catch active dropout: twice more for a small
    result (on a few dozen numbers two calls now and then drop the same ones)."""
    a = call(fn, *args, name=name)
    small = isinstance(a, torch.Tensor) and a.numel() <= 4096
    for _ in range(2 if small else 1):
        b = call(fn, *args, name=name)
        if (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.shape == b.shape
            and not equal(a, b)
        ):
            fail("{name}: {why}", name=name, why=DROPOUT)
    return a
