"""course.models: the embedded model, COURSE_MODEL, bertviz's twin, tiny BERTs."""

import pytest
import torch

from course import models
from course.data import SAMPLE_TEXT


def test_course_model_gives_attentions_and_hidden_states():
    model, tokenizer = models.load()
    enc = tokenizer(SAMPLE_TEXT, return_tensors="pt")
    out = model(**enc)
    c = model.config
    T = enc["input_ids"].shape[1]
    assert len(out.attentions) == c.num_hidden_layers
    assert out.attentions[0].shape == (1, c.num_attention_heads, T, T)
    assert len(out.hidden_states) == c.num_hidden_layers + 1
    assert not model.training
    rows = out.attentions[-1].sum(-1)
    assert torch.allclose(rows, torch.ones_like(rows), atol=1e-5)


def test_oracle_model_is_a_separate_object_with_equal_weights():
    a, b = models.load_model(), models.oracle_model()
    assert a is not b
    assert torch.equal(a.pooler.dense.weight, b.pooler.dense.weight)


def test_missing_model_fails_with_one_sentence(monkeypatch, tmp_path):
    monkeypatch.setenv(models.ENV_VAR, str(tmp_path / "no-such-bert"))
    with pytest.raises(models.ModelNotAvailable) as info:
        models.load_model()
    text = str(info.value)
    assert "not available on this machine" in text and models.ENV_VAR in text
    assert info.value.__cause__ is None  # no hub traceback chained behind it
    assert info.value._render_traceback_() == [f"ModelNotAvailable: {text}"]


def test_missing_hub_id_fails_offline(monkeypatch):
    with pytest.raises(models.ModelNotAvailable, match="bert-large-cased"):
        models.load_tokenizer("bert-large-cased")


def test_neuron_view_model_matches_transformers():
    model, tokenizer = models.load()
    nv_model, nv_tokenizer = models.neuron_view_model()
    assert nv_tokenizer.tokenize(SAMPLE_TEXT) == tokenizer.tokenize(SAMPLE_TEXT)
    enc = tokenizer(SAMPLE_TEXT, return_tensors="pt")
    with torch.no_grad():
        ours = model(**enc)
        theirs = nv_model(enc["input_ids"], token_type_ids=enc["token_type_ids"])
    for layer, entry in enumerate(theirs[-1]):
        assert sorted(entry) == ["attn", "keys", "queries"]
        assert torch.allclose(entry["attn"], ours.attentions[layer], atol=1e-5)
    assert torch.allclose(theirs[0], ours.last_hidden_state, atol=1e-4)


@pytest.mark.parametrize("heads,head_size,layers", [(1, 4, 1), (3, 5, 2), (6, 2, 3)])
def test_tiny_bert_shapes_follow_the_arguments(heads, head_size, layers):
    model = models.tiny_bert(
        seed=0, num_layers=layers, num_heads=heads, head_size=head_size
    )
    out = model(torch.tensor([[1, 2, 3, 4]]))
    assert out.last_hidden_state.shape == (1, 4, heads * head_size)
    assert out.attentions[0].shape == (1, heads, 4, 4)
    assert len(out.hidden_states) == layers + 1


def test_tiny_bert_is_seeded_and_has_nonzero_biases():
    a, b = models.tiny_bert(seed=3), models.tiny_bert(seed=3)
    assert torch.equal(
        a.encoder.layer[0].attention.self.query.bias,
        b.encoder.layer[0].attention.self.query.bias,
    )
    assert a.encoder.layer[0].attention.self.query.bias.abs().sum() > 0
    assert not torch.equal(
        a.embeddings.word_embeddings.weight,
        models.tiny_bert(seed=4).embeddings.word_embeddings.weight,
    )


@pytest.mark.xdist_group("bert_base")  # one worker saves the 440 MB model
def test_neuron_view_on_a_bert_base_sized_model_saved_without_vocab_txt(
    monkeypatch, bert_base_sized
):
    """COURSE_MODEL at a bert-base-sized BERT (random weights) saved with the course
    tokenizer, which writes tokenizer.json but no vocab.txt: the neuron view still
    gets a tokenizer, and its queries/keys are bert-base's shapes."""
    from course import viz

    assert not (bert_base_sized / "vocab.txt").exists()
    monkeypatch.setenv(models.ENV_VAR, str(bert_base_sized))
    nv_model, nv_tokenizer = models.neuron_view_model()
    assert nv_tokenizer is not None
    assert nv_tokenizer.tokenize(SAMPLE_TEXT) == models.load_tokenizer().tokenize(
        SAMPLE_TEXT
    )
    ids = models.load_tokenizer()(SAMPLE_TEXT, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        entry = nv_model(ids)[-1][0]
    assert entry["queries"].shape == (1, 12, ids.shape[1], 64)
    assert "attn-line-group" in viz.neuron_view(SAMPLE_TEXT, layer=0, head=0).data


def test_modern_bert_is_seeded_alternates_layers_and_scores_are_not_flat():
    """Same seed, same weights; layer i is global where i % global_every == 0; and
    its random attention is far from uniform (ModernBERT's own init is nearly
    uniform at this size, and no mistake would show in it)."""
    a, b = models.modern_bert(seed=3), models.modern_bert(seed=3)
    pairs = zip(a.parameters(), b.parameters(), strict=True)
    assert all(torch.equal(p, q) for p, q in pairs)
    model = models.modern_bert(num_layers=4, global_every=2, local_attention=4)
    assert model.config.layer_types == ["full_attention", "sliding_attention"] * 2
    ids = torch.randint(1, 100, (1, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        probs = model(ids, output_attentions=True).attentions[0]  # global: (1, H, T, T)
    assert float(probs.max()) > 3 / 12  # a uniform row would be 1/12 everywhere


def test_tiny_llama_keeps_fewer_kv_heads_in_its_cache():
    model = models.tiny_llama(num_heads=6, num_kv_heads=2, head_size=4)
    with torch.no_grad():
        cache = model(torch.tensor([[1, 2, 3]]), use_cache=True).past_key_values
    assert model.config.num_attention_heads == 6
    assert all(
        layer.keys.shape == layer.values.shape == (1, 2, 3, 4) for layer in cache.layers
    )
