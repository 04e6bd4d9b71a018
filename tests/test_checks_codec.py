"""course.checks.codec: values out of the kernel as plain JSON and back, and
evidence no answer could have produced refused in bounded time and memory."""

import json

import pytest
import torch
from torch import nn

from course import models
from course.checks import codec


class Student(nn.Module):  # a class defined in the student's notebook
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(4, 4)
        self.ff = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
        self.seq_len = 7

    def forward(self, x):
        return x


def _roundtrip(value, args=()):
    data = json.loads(json.dumps(codec.encode(value, args)))  # as nbformat stores it
    return codec.decode(data, args)


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.float16, torch.int64, torch.bool]
)
def test_tensors_come_back_bit_for_bit(dtype):
    x = (torch.randn(2, 3, 4) * 100).to(dtype)
    back = _roundtrip(x)
    assert back.dtype == dtype and back.shape == x.shape and torch.equal(back, x)
    assert _roundtrip(torch.zeros(0, 3)).shape == (0, 3)


def test_plain_values_and_containers():
    value = {"a": (1, 2.5, float("nan")), "b": [None, True, "s"], 3: torch.Size([2])}
    back = _roundtrip(value)
    assert back["b"] == [None, True, "s"] and back[3] == torch.Size([2])
    assert back["a"][:2] == (1, 2.5) and back["a"][2] != back["a"][2]  # NaN


def test_student_module_is_rebuilt_as_structure_and_weights_only():
    m = Student()
    back = _roundtrip(m)
    assert type(back).__name__ == "Student" and isinstance(back, codec.Recorded)
    assert isinstance(back.q_proj, nn.Linear) and isinstance(back.ff[1], nn.ReLU)
    assert torch.equal(back.ff[0].weight, m.ff[0].weight) and back.seq_len == 7
    with pytest.raises(codec.Missing):  # its code did not travel
        back(torch.zeros(1))


def test_transformers_model_is_rebuilt_from_config_and_weights():
    bert = models.tiny_bert(seed=1, num_layers=1)
    back = _roundtrip(bert)
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        want = bert(input_ids=ids).last_hidden_state
        got = back(input_ids=ids).last_hidden_state
    assert type(back) is type(bert) and torch.allclose(got, want)


def test_a_submodule_of_an_argument_comes_back_as_the_grader_s_own_object():
    bert = models.tiny_bert(seed=1, num_layers=2)
    query = bert.encoder.layer[1].attention.self.query
    assert _roundtrip(query, (bert, 1)) is query


def test_an_unknown_object_keeps_only_its_type_name():
    class Sneaky:
        def __eq__(self, other):
            return True

    back = _roundtrip(Sneaky())
    assert type(back).__name__ == "Sneaky" and back != 1


def _nested(depth: int):
    data = 1
    for _ in range(depth):
        data = {"__list": [data]}
    return data


def _bert(**sizes) -> dict:
    return {"__hf": ["BertModel", {**models.tiny_bert().config.to_dict(), **sizes}, {}]}


ABSURD = {  # built when a test asks: some are large
    "a 10 GB tensor": lambda: {"__t": ["float32", [50_000, 50_000], ""]},
    "a shape that is not one": lambda: {"__t": ["float32", ["9" * 40], ""]},
    "bytes that do not fit the shape": lambda: {"__t": ["float32", [4, 4], "AAAA"]},
    "deep nesting": lambda: _nested(10_000),
    "a huge string": lambda: "x" * (codec.MAX_ELEMENTS + 1),
    "a million hidden units": lambda: _bert(hidden_size=1_000_000),
    "a thousand layers": lambda: _bert(num_hidden_layers=1000),
    # Sizes under another model's names: 1.6 GB for the judge, once.
    "a BART whose feed-forward is 131,072 wide": lambda: _bart(
        d_model=1024, encoder_ffn_dim=1 << 17, decoder_ffn_dim=1 << 17
    ),
}


def _bart(**sizes) -> dict:
    from transformers import BartConfig

    return {"__hf": ["BartModel", {**BartConfig().to_dict(), **sizes}, {}]}


@pytest.mark.parametrize("what", sorted(ABSURD))
def test_absurd_evidence_fails_fast_and_small(what):
    """Data from the kernel stays data: evidence no answer could have produced is
    refused before anything is allocated for it (ValueError, well under a second)."""
    import time
    import tracemalloc

    data = ABSURD[what]()
    tracemalloc.start()
    start = time.perf_counter()
    with pytest.raises(ValueError):
        codec.decode(data)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert seconds < 2 and peak < 64 << 20, (seconds, peak)
