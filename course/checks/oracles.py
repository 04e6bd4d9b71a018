"""Oracle helpers shared by the per-notebook checks.

* :class:`Case`: one run of a model on a (padded) batch, with what the model itself
  computed at one layer: the layer's input, its attention probabilities, and the
  self-attention module's output (captured by a forward hook).
* :func:`course_case` / :func:`random_cases`: that run on the course model and the
  sample text, or on tiny BERTs of random sizes and padded random batches;
  :func:`own_copy` gives a caller its own copy of a case made once.
* :func:`sample_qk`: bertviz's neuron-view queries and keys of a text;
* :func:`eager_attention` / :func:`additive_mask`: transformers' own eager
  attention (``eager_attention_forward``, with ``repeat_kv``) for Q, K, V and a
  bool mask, the oracle where a check has Q, K and V but no module;
* the sentences the checks of several notebooks say (:data:`NO_SCALE`,
  :data:`BY_WIDTH`, :data:`BY_LENGTH`, :data:`PADDING_INVERTED`,
  :data:`OVER_QUERIES`, :data:`PROBS_T`, :data:`SPLIT_NO_TRANSPOSE`,
  :data:`HEADS_D_T`, :data:`PER_BLOCK`, :data:`FUSED`, :data:`BY_HAND`): a
  notebook's checks import no other notebook's.

Every value here comes from the model or bertviz, never from a solution.
"""

from __future__ import annotations

import copy
import functools
import random
from types import SimpleNamespace

import torch
from transformers.models.llama import modeling_llama as llama

from .. import data
from ..i18n import N_
from . import call, random_batch, random_tiny_bert
from .lessons import Lesson

# Sentences the checks of several notebooks say.
NO_SCALE = N_(
    "missing 1/sqrt(d): divide the scores by the square root of the head size.",
    mistake="no-scale",
)
#: A key mask laid along the queries (06's head_attention, 07's bert_layer).
QUERY_AXIS = N_(
    "the mask was laid along the queries, (B, 1, T, 1) (one head: (B, T, 1)): it "
    "must block keys, so it goes along the scores' last dim, (B, 1, 1, T) (one "
    "head: (B, 1, T)). Along the queries it pushes a padded query's whole row "
    "down, and the padded keys keep their weight.",
    mistake="mask-along-queries",
)
BY_D = N_("it divides by d; the scale is 1/sqrt(d).", mistake="by-d")
PADDING_INVERTED = N_(
    "the mask is the wrong way round: the real tokens got the large negative "
    "number and the padding kept its scores. Padding is where attention_mask is "
    "0: add (1 - mask) * -10000 (or the dtype's min).",
    mistake="padding-mask-inverted",
)
BY_WIDTH = N_(
    "it divides by sqrt(D), the model width; the scale uses the head size d = D / H.",
    mistake="scaled-by-width",
)
OVER_QUERIES = N_(
    "the softmax runs over the queries (dim -2): each query's row of weights must "
    "sum to 1 over the keys, the last dim.",
    mistake="softmax-over-queries",
)
PROBS_T = N_(
    "context used the transposed probabilities: row i of probs is query i's "
    "weights over the keys, so context = probs @ V, not probs.transpose(-2, -1) @ V.",
    mistake="probs-transposed",
)
SPLIT_NO_TRANSPOSE = N_(
    "the heads were split with view(B, H, T, d) and no transpose: that reads each "
    "token's features as if they were laid out head by head across the tokens, "
    "so heads and tokens are mixed. View as (B, T, H, d), then transpose(1, 2).",
    mistake="split-view",
)
#: Heads split with the last two dims swapped, (B, H, d, T): 04's split_heads and
#: 11's fixed_split_heads say it (after "{name} has shape {got};").
HEADS_D_T = N_(
    "it is laid out (B, H, d, T): T and d are swapped (e.g. by transpose(1, 3), or "
    "a permute order that puts T last). Each head is a (T, d) block, a row per "
    "token: (B, H, T, d).",
    mistake="heads-d-t",
)
BY_LENGTH = N_(
    "the scores are divided by sqrt(T), the sequence length; the scale is "
    "1/sqrt(d), d the head size (the last dim of Q).",
    mistake="scaled-by-length",
)
PER_BLOCK = N_(
    "each block of keys is normalised on its own; keep a running max and sum "
    "across blocks, and rescale what you summed so far when the max grows.",
    mistake="per-block",
)
FUSED = N_(
    "Write the blocks by hand: torch's fused attention is turned off for this exercise.",
    mistake="fused-shortcut",
)
#: A softmax (or masked softmax) that reduces over the last dim whatever ``dim`` it
#: is given.
LAST_DIM = N_(
    "it always normalises over the last dim: reduce along the `dim` it is given.",
    mistake="fixed-dim",
)
BY_HAND = N_(
    "Compute attention by hand from self_attn.query/key/value: calling the "
    "attention module (or torch's fused attention) is the shortcut this "
    "exercise turns off."
)


def additive_mask(
    mask: torch.Tensor | None, dtype=torch.float64, fill: float | None = None
) -> torch.Tensor | None:
    """A bool mask (True = may attend) as the additive mask transformers adds: 0
    where allowed, ``fill`` where blocked (default: the dtype's lowest number;
    ``-inf`` gives the NaN of a row with nothing allowed)."""
    if mask is None:
        return None
    fill = torch.finfo(dtype).min if fill is None else fill
    return torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, fill)


def eager_attention(
    Q: torch.Tensor,
    K: torch.Tensor,
    V: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    scale: bool = True,
    groups: int | None = None,
    fill: float | None = None,
) -> torch.Tensor:
    """transformers' eager attention in float64: Q (B, H, Tq, d), K and V
    (B, H_kv, Tk, d), each K/V head shared by ``groups`` query heads (default
    H // H_kv, as ``repeat_kv``); ``mask`` bool, True = may attend. (B, H, Tq, d)."""
    module = SimpleNamespace(
        num_key_value_groups=groups or Q.shape[1] // K.shape[1], training=False
    )
    out, _ = llama.eager_attention_forward(
        module,
        Q.double(),
        K.double(),
        V.double(),
        additive_mask(mask, fill=fill),
        scaling=Q.shape[-1] ** -0.5 if scale else 1.0,
    )
    return out.transpose(1, 2)  # (B, H, Tq, d)


class Case:
    """One oracle run: a BERT, one of its layers, a batch, and what the model
    itself computed there (the one oracle case of every check).

    Parameters
    ----------
    model : transformers.BertModel
        Run in eval mode with ``output_hidden_states`` and ``output_attentions``.
    layer : int
        The layer whose values are kept.
    ids, mask : torch.Tensor
        ``(B, T)`` token ids and attention mask (1: a token, 0: padding).
    types : torch.Tensor, optional
        ``(B, T)`` token type ids (the model's default: all 0).

    Attributes
    ----------
    block : the layer's module (``model.encoder.layer[layer]``); ``self_attn``:
    its self-attention. ``states``: every hidden state; ``hidden`` and ``after``:
    the layer's input and output ``(B, T, D)``; ``probs``: its attention
    probabilities ``(B, H, T, T)``; ``context``: the self-attention's output
    ``(B, T, D)``; ``attn_out``: the attention block's (after its output dense,
    residual and LayerNorm).
    """

    def __init__(self, model, layer: int, ids, mask, types=None):
        self.model, self.layer = model, layer
        self.ids, self.types, self.mask = ids, types, mask
        self.block = model.encoder.layer[layer]
        self.self_attn = self.block.attention.self
        seen = {}

        def keep(name):
            def hook(_module, _inputs, output) -> None:  # None: output unchanged
                seen[name] = output[0] if isinstance(output, tuple) else output

            return hook

        hooks = [
            self.self_attn.register_forward_hook(keep("context")),
            self.block.attention.register_forward_hook(keep("attention")),
        ]
        with torch.no_grad():
            out = model(input_ids=ids, token_type_ids=types, attention_mask=mask)
        for hook in hooks:
            hook.remove()
        self.states = out.hidden_states
        self.hidden = out.hidden_states[layer]  # (B, T, D)
        self.after = out.hidden_states[layer + 1]  # (B, T, D)
        self.probs = out.attentions[layer]  # (B, H, T, T)
        self.context = seen["context"]  # (B, T, D)
        self.attn_out = seen["attention"]  # (B, T, D)
        c = model.config
        self.H, self.d = c.num_attention_heads, c.hidden_size // c.num_attention_heads

    @property
    def ext(self) -> torch.Tensor:
        """The mask as BERT's layers take it: ``(B, 1, 1, T)``, 0 or float32's
        minimum."""
        return (1.0 - self.mask[:, None, None, :].float()) * torch.finfo(
            torch.float32
        ).min

    def context_of(self, x: torch.Tensor, masked: bool = True) -> torch.Tensor:
        """The layer's self-attention output (before its output dense) of ``x``
        ``(B, T, D)``, with this case's mask (or, not ``masked``, none)."""
        with torch.no_grad():
            out = self.self_attn(x, attention_mask=self.ext if masked else None)
        return out[0] if isinstance(out, tuple) else out

    def qkv(self, head: int | None = None):
        """Q, K, V as (B, H, T, d), or (B, T, d) for one head (from the linears)."""
        B, T, _ = self.hidden.shape
        with torch.no_grad():
            q, k, v = (
                lin(self.hidden).view(B, T, self.H, self.d).transpose(1, 2)
                for lin in (
                    self.self_attn.query,
                    self.self_attn.key,
                    self.self_attn.value,
                )
            )
        return (q, k, v) if head is None else (q[:, head], k[:, head], v[:, head])

    def run(self, fn, *args, name: str, lesson: Lesson):
        """Call ``fn(hidden, self_attn, *args)`` with ``lesson``'s shortcuts off."""
        args = (self.hidden.clone(), self.self_attn, *args)
        with lesson.enforced(args):
            return call(fn, *args, name=name)


def own_copy(case):
    """``case`` with its own copy of every tensor in it: a student's call may
    change its inputs in place. Its modules stay shared, as the model is."""
    new = copy.copy(case)
    for key, value in vars(case).items():
        if isinstance(value, torch.Tensor):
            setattr(new, key, value.clone())
        elif isinstance(value, tuple) and all(torch.is_tensor(v) for v in value):
            setattr(new, key, tuple(v.clone() for v in value))
    return new


def course_case(padded: bool = False, text: str = data.SAMPLE_TEXT) -> Case:
    """Layer 0 of the course model on ``text`` (and a short text, padded).

    The model runs once per input and process (a notebook's checks ask for the
    same few inputs again and again); each caller gets its own tensors.
    """
    return own_copy(_course_case(padded, text))


@functools.lru_cache(maxsize=8)
def _course_case(padded: bool, text: str) -> Case:
    from .. import models  # transformers takes seconds to import; 09 never needs it

    tok = models.load_tokenizer()
    texts = [text, "A short one."] if padded else [text]
    enc = tok(texts, padding=True, return_tensors="pt")
    return Case(models.oracle_model(), 0, enc["input_ids"], enc["attention_mask"])


#: How much larger a tiny random BERT's attention weights are made where a check
#: must see the scale. At BERT's own initialisation (std 0.02) its attention is
#: near uniform and adds little to the residual: a scale of sqrt(D) for sqrt(d)
#: moved 07's attention block by 1.3e-6 at least and 1.9e-5 in the median over 15
#: seeds' cases, below the 1e-4 tolerance (06's one-head probs passed on seed 189).
#: With weights 10 times larger, by 2.7e-3 at least (median 0.074), the largest
#: probability of a row being 0.9 in the median (not saturated).
SHARPEN = 10.0


def sharpen_attention(model):
    """``model`` with its attention's query, key, value and output weights
    multiplied by :data:`SHARPEN`; the model stays the oracle of its own values."""
    with torch.no_grad():
        for block in model.encoder.layer:
            sa, out = block.attention.self, block.attention.output
            for linear in (sa.query, sa.key, sa.value, out.dense):
                linear.weight.mul_(SHARPEN)
    return model


def random_cases(seed: int, n: int = 3, heads=(1, 2, 3, 4), sharpen: bool = False):
    """Tiny BERTs of other sizes, at a random layer, on padded random batches
    (their attention sharpened, :func:`sharpen_attention`, if ``sharpen``).

    The first has several heads where ``heads`` allows it: with one head, heads
    mixed up when merged give the right numbers, and sqrt(D) is sqrt(d).
    """
    rng = random.Random(seed)
    several = tuple(h for h in heads if h > 1) or heads
    for i in range(n):
        model = random_tiny_bert(rng, several if i == 0 else heads)
        if sharpen:
            model = sharpen_attention(model)
        ids, _, mask = random_batch(rng)
        yield Case(model, rng.randrange(model.config.num_hidden_layers), ids, mask)


@functools.lru_cache(maxsize=1)
def _oracle_neuron_view():
    """bertviz's neuron-view model of :func:`course.models.oracle_model`, built once
    (bertviz initialises every module before it gets the weights: 0.1 s a build)."""
    from .. import models

    return models.neuron_view_model(models.oracle_model())[0]


def sample_qk(layer: int = 0, text: str = data.SAMPLE_TEXT):
    """bertviz's neuron-view queries and keys of ``text``, (1, H, T, d) each
    (computed once per layer, text and process; each caller gets its own)."""
    queries, keys = _sample_qk(layer, text)
    return queries.clone(), keys.clone()


@functools.lru_cache(maxsize=8)
def _sample_qk(layer: int, text: str):
    from .. import models

    nv_model = _oracle_neuron_view()
    enc = models.load_tokenizer()(text, return_tensors="pt")
    with torch.no_grad():
        entry = nv_model(enc["input_ids"], token_type_ids=enc["token_type_ids"])[-1][
            layer
        ]
    return entry["queries"], entry["keys"]
