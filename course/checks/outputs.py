"""Checks for 02_outputs: tokenizer batches, output shapes, the pooler, bertviz data."""

from __future__ import annotations

import random

import torch

from .. import data, models
from ..hints import hint as hint  # the notebook's check.hint("<exercise>")
from ..i18n import N_, say
from ..worked import worked as worked  # check.worked("<exercise>"), once tried
from . import call, equal, expect_close, expect_shape, fail
from .calls import CaseVerdicts
from .lessons import Lesson

POOLER = N_(
    "Recompute the pooler by hand from its dense layer; calling model.pooler "
    "is the shortcut this exercise turns off."
)
LESSONS = {"pooler": Lesson(POOLER, whole=("0.pooler",))}  # pooler(model, hidden)
WORDS = (  # random texts are made of these
    "the",
    "bank",
    "river",
    "money",
    "attention",
    "head",
    "query",
    "key",
    "value",
    "layer",
    "token",
    "sat",
    "on",
    "mat",
)


def _random_texts(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choices(WORDS, k=rng.randint(1, 14))) for _ in range(n)]


def _expect_batch(fn, tokenizer, texts, max_length) -> None:
    # The truth first: the answer gets the tokenizer itself (calls.private).
    singles = [tokenizer(t)["input_ids"] for t in texts]
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    enc = call(fn, tokenizer, texts, max_length, name="encode")
    if (
        not hasattr(enc, "keys")
        or "input_ids" not in enc
        or "attention_mask" not in enc
    ):
        fail(
            "encode should return the tokenizer's BatchEncoding (with "
            "input_ids and attention_mask)."
        )
    ids, mask = enc["input_ids"], enc["attention_mask"]
    if not isinstance(ids, torch.Tensor):
        fail(
            "input_ids is a {type_name}: ask the tokenizer for PyTorch "
            "tensors (return_tensors='pt').",
            mistake="lists",
            type_name=type(ids).__name__,
        )
    longest = max(len(s) for s in singles)
    T = min(longest, max_length)
    if ids.shape[1] == max_length and T < max_length:
        fail(
            "The batch is padded to max_length={max_length}, but it "
            "should be padded only to the longest text ({T} tokens).",
            mistake="max-padding",
            max_length=max_length,
            T=T,
        )
    if longest > max_length and ids.shape[1] > max_length:
        fail(
            "The batch has {shape} tokens per row but max_length is "
            "{max_length}: truncate.",
            shape=ids.shape[1],
            max_length=max_length,
        )
    expect_shape(ids, (len(texts), T), "input_ids")
    expect_shape(mask, (len(texts), T), "attention_mask")
    for row, single in enumerate(singles):
        n = min(len(single), max_length)
        want_mask = torch.tensor([1] * n + [0] * (T - n))
        if not equal(mask[row].long(), want_mask):
            fail(
                "attention_mask row {row} should be 1 on its {n} tokens "
                "and 0 on padding.",
                row=row,
                n=n,
            )
        if ids[row, n - 1].item() != sep or ids[row, 0].item() != cls:
            fail(
                "Each row should start with [CLS] and end with [SEP], "
                "also when truncated."
            )


def encode_types(fn) -> None:
    """encode gives a BatchEncoding of tensors for two texts of different lengths."""
    tok = models.load_tokenizer()
    _expect_batch(fn, tok, [data.SAMPLE_TEXT, "A short one."], 64)


def encode_truncates(fn) -> None:
    """Long texts are cut at max_length; short ones padded to the longest."""
    tok = models.load_tokenizer()
    _expect_batch(fn, tok, [data.SAMPLE_TEXT, "Hi."], 8)


def encode_random(fn, seed: int) -> None:
    """Random batches and lengths."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    tok = models.load_tokenizer()
    for i in range(5):  # every other batch holds a text longer than max_length
        with verdicts:
            texts = _random_texts(rng, rng.randint(1, 4))
            if i % 2 == 0:
                texts.append(" ".join(rng.choices(WORDS, k=14)))
            _expect_batch(fn, tok, texts, rng.randint(4, 12) if i % 2 == 0 else 20)
    verdicts.fail_if_any()


def _true_shapes(model, B: int, T: int) -> dict:
    gen = torch.Generator().manual_seed(B * 100 + T)
    ids = torch.randint(1, model.config.vocab_size, (B, T), generator=gen)
    with torch.no_grad():
        out = model(input_ids=ids)
    return {
        "last_hidden_state": tuple(out.last_hidden_state.shape),
        "pooler_output": tuple(out.pooler_output.shape),
        "hidden_states": tuple(out.hidden_states[0].shape),
        "num_hidden_states": len(out.hidden_states),
        "attentions": tuple(out.attentions[0].shape),
        "num_attentions": len(out.attentions),
    }


def _expect_shapes(fn, model, B: int, T: int) -> None:
    got = call(fn, model.config, B, T, name="output_shapes")
    if not isinstance(got, dict):
        fail(
            "output_shapes should return a dict, not {type_name}.",
            type_name=type(got).__name__,
        )
    truth = _true_shapes(model, B, T)
    for key, want in truth.items():
        if key not in got:
            fail("output_shapes is missing the key {key!r}.", key=key)
        value = (
            tuple(got[key])
            if isinstance(got[key], (list, tuple, torch.Size))
            else got[key]
        )
        if value == want:
            continue
        H, D = model.config.num_attention_heads, model.config.hidden_size
        if key == "attentions" and value == (B, D, T, T):
            fail(
                "attentions has D where H goes: one (T, T) map per head, "
                "so (B, H, T, T).",
                mistake="attentions-d",
            )
        if key == "num_hidden_states" and value == want - 1:
            fail(
                "hidden_states has one entry per layer plus the "
                "embedding output: L + 1.",
                mistake="count",
            )
        if key in ("last_hidden_state", "hidden_states") and value == (B, T, H):
            fail("{key} has H where D goes: (B, T, D).", key=key)
        fail(
            "output_shapes()[{key!r}] is {value}, but the model gives {want}.",
            key=key,
            value=value,
            want=want,
        )


def output_shapes_course(fn) -> None:
    """Shapes for the course model, batch 2 and 7 tokens, match its real outputs."""
    _expect_shapes(fn, models.oracle_model(), 2, 7)


def output_shapes_random(fn, seed: int) -> None:
    """Shapes for BERTs of other sizes, batches and lengths."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    for _ in range(4):
        with verdicts:
            model = models.tiny_bert(
                seed=rng.randint(0, 99),
                num_layers=rng.randint(1, 4),
                num_heads=rng.choice([1, 2, 3, 5]),
                head_size=rng.choice([2, 3, 8]),
            )
            _expect_shapes(fn, model, rng.randint(1, 4), rng.randint(1, 9))
    verdicts.fail_if_any()


def _expect_pooler(fn, model, ids) -> None:
    with torch.no_grad():
        out = model(input_ids=ids)
    last, want = out.last_hidden_state, out.pooler_output
    dense = model.pooler.dense
    args = (model, last.clone())
    with LESSONS["pooler"].enforced(args):
        got = call(fn, *args, name="pooler")
    expect_shape(
        got,
        want.shape,
        "pooler(model, last_hidden_state)",
        say("One vector per text: (B, D)."),
    )
    first = last[:, 0]
    diagnose = {
        say(
            "the tanh is missing: pooler = tanh(dense(h_[CLS])).", mistake="no-tanh"
        ): dense(first),
        say(
            "it pools the mean token; BERT's pooler takes the first token, [CLS].",
            mistake="mean",
        ): torch.tanh(dense(last.mean(1))),
        say(
            "it skips the dense layer: pooler = tanh(dense(h_[CLS])).",
            mistake="pooler-no-dense",
        ): torch.tanh(first),
        say(
            "it takes the last token; BERT's pooler takes the first, [CLS].",
            mistake="last-token",
        ): torch.tanh(dense(last[:, -1])),
    }
    expect_close(
        got,
        want,
        "pooler(...)",
        diagnose=diagnose,
        what=say("the model's pooler_output"),
    )


def pooler_course(fn) -> None:
    """The course model's pooler_output on the sample text."""
    model, tok = models.oracle_model(), models.load_tokenizer()
    _expect_pooler(
        fn,
        model,
        tok([data.SAMPLE_TEXT, "A short one."], padding=True, return_tensors="pt")[
            "input_ids"
        ],
    )


def pooler_random(fn, seed: int) -> None:
    """pooler_output of BERTs of other sizes and batches."""
    verdicts = CaseVerdicts()
    rng = random.Random(seed)
    for _ in range(3):
        with verdicts:
            model = models.tiny_bert(
                seed=rng.randint(0, 99),
                num_heads=rng.choice([2, 3]),
                head_size=rng.choice([4, 6]),
            )
            gen = torch.Generator().manual_seed(rng.randint(0, 999))
            shape = (rng.randint(1, 3), rng.randint(2, 9))
            ids = torch.randint(1, 100, shape, generator=gen)
            _expect_pooler(fn, model, ids)
    verdicts.fail_if_any()


def _expect_keys(fn, model) -> None:
    nv_model, _ = models.neuron_view_model(model)
    gen = torch.Generator().manual_seed(model.config.num_hidden_layers)
    ids = torch.randint(1, model.config.vocab_size, (1, 5), generator=gen)
    with torch.no_grad():
        output = nv_model(ids)
    want = sorted(output[-1][0].keys())
    got = call(fn, output, name="neuron_view_keys")
    if not isinstance(got, (list, tuple)):
        fail(
            "neuron_view_keys should return a list of str, not {type_name}.",
            type_name=type(got).__name__,
        )
    if sorted(got) != want:
        fail(
            "neuron_view_keys returned {got}; the entry of one layer has "
            "other keys. Look at output[-1][0].",
            got=list(got),
        )


def neuron_view_keys_course(fn) -> None:
    """The keys of one layer's entry in bertviz's neuron-view output."""
    _expect_keys(fn, models.oracle_model())


def neuron_view_keys_random(fn, seed: int) -> None:
    """Also for a neuron-view model of another size."""
    _expect_keys(fn, models.tiny_bert(seed=seed, num_layers=3, num_heads=2))
