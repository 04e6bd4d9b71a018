"""The evidence codec: values out of the kernel as plain JSON data, and back.

Decoding never runs student code and never unpickles: tensors travel as raw bytes
with dtype and shape, modules as their structure and weights, rebuilt from
``torch.nn`` or ``transformers`` classes, or as :class:`Recorded` stand-ins.
Evidence is data from the kernel: absurd sizes fail their check, in bounded time
and memory, before anything is allocated for them. :func:`digest` fingerprints a
call's inputs, so a replay knows it answers the same call.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math

import torch
from torch import nn

MAX_ELEMENTS = 1 << 26  # numbers in one tensor (bert-base's largest: 23 million)
MAX_DEPTH = 64  # nesting of lists, dicts and modules
MAX_CONFIG = 1 << 17  # any whole number in a model's config (sizes, ids)
MAX_LAYERS = 48
MAX_PARAMETERS = 1 << 28  # a rebuilt transformers model (bert-base: 110 million)
PRIMITIVE = (bool, int, str, type(None))


class Missing(Exception):
    """Replay asked for a call that the kernel did not record."""


class Recorded(nn.Module):
    """A student-defined module, rebuilt as its structure and weights only."""

    def forward(self, *args, **kwargs):  # pragma: no cover - replay answers calls
        raise Missing("a recorded module cannot run")


class Opaque:
    """A value of a type the grader does not rebuild; only its type name is kept."""


def encode_tensor(t: torch.Tensor) -> dict:
    t = t.detach().cpu().contiguous()
    raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    dtype = str(t.dtype).removeprefix("torch.")
    return {"__t": [dtype, list(t.shape), base64.b64encode(raw).decode()]}


def decode_tensor(spec: list) -> torch.Tensor:
    dtype, shape, raw = spec
    dtype = getattr(torch, str(dtype), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError("not a dtype")
    if not (isinstance(shape, list) and len(shape) <= 8):
        raise ValueError("not a shape")
    if not all(isinstance(n, int) and 0 <= n <= MAX_ELEMENTS for n in shape):
        raise ValueError("not a shape")
    if math.prod(shape) > MAX_ELEMENTS:
        raise ValueError(f"a tensor of {math.prod(shape)} numbers")
    if not isinstance(raw, str) or len(raw) > MAX_ELEMENTS * 8 * 4 // 3 + 4:
        raise ValueError("not tensor data")
    data = bytearray(base64.b64decode(raw))
    if len(data) != math.prod(shape) * dtype.itemsize:
        raise ValueError("tensor data of the wrong size")
    if not data:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(data, dtype=torch.uint8).view(dtype).reshape(shape)


def _module(m: nn.Module, seen: set) -> dict:
    cls = type(m)
    if cls.__module__.startswith("transformers.") and hasattr(m, "config"):
        state = {k: encode_tensor(v) for k, v in m.state_dict().items()}
        config = json.loads(m.config.to_json_string(use_diff=False))
        return {"__hf": [cls.__name__, config, state]}
    attrs = {
        k: encode(v, (), seen)
        for k, v in vars(m).items()
        if not k.startswith("_") and is_plain(v)
    }
    return {
        "__m": {
            "cls": cls.__name__,
            "torch": cls.__module__.startswith("torch.nn."),
            "attrs": attrs,
            "params": {k: _param(p) for k, p in m._parameters.items()},
            "buffers": {k: _param(b) for k, b in m._buffers.items()},
            "children": {k: encode(c, (), seen) for k, c in m._modules.items()},
        }
    }


def _param(p) -> dict | None:
    if p is None:
        return None
    out = encode_tensor(p)
    out["grad"] = bool(getattr(p, "requires_grad", False))
    return out


def is_plain(v) -> bool:
    if isinstance(v, PRIMITIVE + (float,)):
        return True
    return isinstance(v, (tuple, list)) and all(is_plain(x) for x in v)


def _ref(value, args) -> list | None:
    """``[i, path, weights]`` if ``value`` is argument ``i`` or its submodule at
    ``path`` (``weights``: :func:`_weights` of a submodule, "" for the argument)."""
    for i, arg in enumerate(args):
        if value is arg:
            return [i, "", ""]
        if isinstance(arg, nn.Module) and isinstance(value, nn.Module):
            for path, sub in arg.named_modules(remove_duplicate=False):
                if sub is value:
                    return [i, path, _weights(sub)]
    return None


def _weights(module: nn.Module) -> str:
    """A fingerprint of a module's every weight, to the bit."""
    h = hashlib.sha1()
    for key, t in module.state_dict().items():
        h.update(f"{key} {t.dtype} {tuple(t.shape)}".encode())
        h.update(t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy())
    return h.hexdigest()


def _resolve(args, i: int, path: str, weights: str):
    """The grader's argument ``i`` or its submodule at ``path``; a submodule only
    where it holds the weights the kernel's did (a student's code may have put
    another module in its place, which no recorded change replays)."""
    if not path:
        return args[i]
    sub = args[i].get_submodule(path)
    if _weights(sub) != weights:
        raise ValueError(f"{path} is not the module the call returned")
    return sub


def encode(value, args=(), seen: set | None = None):
    """``value`` as JSON-ready data; modules and tensors of ``args`` by reference."""
    seen = set() if seen is None else seen
    ref = _ref(value, args) if args else None
    if ref is not None:
        return {"__ref": ref}
    if isinstance(value, float):
        return value if math.isfinite(value) else {"__f": repr(value)}
    if isinstance(value, PRIMITIVE):
        return value
    if id(value) in seen:
        return {"__obj": "a structure that contains itself"}
    seen = seen | {id(value)}
    if isinstance(value, torch.Tensor):
        return encode_tensor(value)
    if isinstance(value, torch.Size):
        return {"__size": list(value)}
    if isinstance(value, torch.dtype):
        return {"__dtype": str(value).removeprefix("torch.")}
    if isinstance(value, nn.Module):
        return _module(value, seen)
    if type(value).__name__ == "BatchEncoding":
        return {"__be": {str(k): encode(v, args, seen) for k, v in value.items()}}
    if type(value).__module__ == "numpy" and hasattr(value, "dtype"):
        return {"__np": encode_tensor(torch.as_tensor(value))}
    if isinstance(value, (tuple, list)):
        key = "__tuple" if isinstance(value, tuple) else "__list"
        return {key: [encode(v, args, seen) for v in value]}
    if type(value) is dict:
        items = [[encode(k, (), seen), encode(v, args, seen)] for k, v in value.items()]
        return {"__dict": items}
    return {"__obj": type(value).__name__}


def decode(data, args=(), depth: int = 0):
    """Rebuild what :func:`encode` wrote; ``args`` are the grader's own arguments.

    Raises ``ValueError`` for evidence nothing could have encoded: nested past
    :data:`MAX_DEPTH`, a tensor past :data:`MAX_ELEMENTS`, a model past
    :data:`MAX_PARAMETERS`.
    """
    if depth > MAX_DEPTH:
        raise ValueError("evidence nested too deep")
    if isinstance(data, str) and len(data) > MAX_ELEMENTS:
        raise ValueError("a string too long")
    if not isinstance(data, dict):
        return data
    if len(data) != 1:
        raise ValueError("not evidence")
    (key, v), *_ = data.items()
    depth += 1
    if key == "__t":
        return decode_tensor(v)
    if key == "__ref":
        return _resolve(args, *v)
    simple = {
        "__f": float,
        "__size": torch.Size,
        "__dtype": lambda s: getattr(torch, s),
        "__np": lambda t: decode_tensor(t["__t"]).numpy(),
        "__obj": lambda name: type(str(name), (Opaque,), {})(),
    }
    if key in simple:
        return simple[key](v)
    if key in ("__tuple", "__list"):
        items = [decode(x, args, depth) for x in v]
        return tuple(items) if key == "__tuple" else items
    if key == "__dict":
        return {_hashable(decode(k, (), depth)): decode(x, args, depth) for k, x in v}
    if key == "__be":
        from transformers import BatchEncoding

        return BatchEncoding({k: decode(x, args, depth) for k, x in v.items()})
    if key == "__hf":
        return _hf_model(*v)
    if key == "__m":
        return _rebuild(v, depth)
    raise ValueError(f"unknown evidence {key!r}")


def _hashable(k):
    return tuple(k) if isinstance(k, list) else k


def _hf_model(name: str, config: dict, state: dict) -> nn.Module:
    import transformers

    cls = getattr(transformers, name, None)
    if not (isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel)):
        raise ValueError(f"{name} is not a transformers model")
    config_cls = cls.config_class
    model = cls(_bounded(cls, config_cls.from_dict(plain_config(config)))).eval()
    for key, spec in state.items():  # shapes may differ from what the config says
        owner_path, _, attr = key.rpartition(".")
        owner = model.get_submodule(owner_path)
        value = decode_tensor(spec["__t"])
        if attr in owner._parameters:
            owner._parameters[attr] = nn.Parameter(value, requires_grad=False)
        elif attr in owner._buffers:
            owner._buffers[attr] = value
    return model


def plain_config(config) -> dict:
    """A config of plain values, every whole number within :data:`MAX_CONFIG`."""
    if not isinstance(config, dict):
        raise ValueError("not a config")
    for key, value in config.items():
        if isinstance(value, int) and not -1 <= value <= MAX_CONFIG:
            raise ValueError(f"a config with {key} = {value}")
        if isinstance(value, (list, dict)) and len(json.dumps(value)) > 1 << 16:
            raise ValueError(f"a config with a huge {key}")
    return config


def _bounded(cls, config):
    """``config``, if the model ``cls`` builds from it is one a course answer
    could build: at most :data:`MAX_LAYERS` in any stack of layers, and at most
    :data:`MAX_PARAMETERS` numbers in its weights and buffers, counted on
    torch's meta device (nothing allocated), whatever the model names its sizes
    (a BART's ``encoder_ffn_dim`` and decoder layers count as BERT's do)."""
    for key, value in config.to_dict().items():
        if "layers" in key and isinstance(value, int) and value > MAX_LAYERS:
            raise ValueError(f"a model with {key} = {value}")
    with torch.device("meta"):
        model = cls(config)
    size = sum(t.numel() for t in [*model.parameters(), *model.buffers()])
    if size > MAX_PARAMETERS:
        raise ValueError(f"a model of {size} numbers")
    return config


def _rebuild(spec: dict, depth: int = 0) -> nn.Module:
    cls = getattr(nn, spec["cls"], None) if spec["torch"] else None
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        cls = type(str(spec["cls"]), (Recorded,), {})
    module = cls.__new__(cls)
    nn.Module.__init__(module)
    for k, v in spec["attrs"].items():
        setattr(module, k, decode(v, (), depth))
    for group, register in (
        ("params", module.register_parameter),
        ("buffers", module.register_buffer),
    ):
        for k, t in spec[group].items():
            value = None if t is None else decode_tensor(t["__t"])
            if group == "params" and value is not None:
                value = nn.Parameter(value, requires_grad=t["grad"])
            register(k, value)
    for k, child in spec["children"].items():
        module.add_module(k, decode(child, (), depth))
    return module


def digest(name: str, args, kwargs) -> str:
    """A short fingerprint of a call's inputs, so replay knows it answers the same."""
    h = hashlib.sha1(name.encode())
    for v in list(args) + sorted(kwargs.items()):
        h.update(_fingerprint(v).encode())
    return h.hexdigest()[:16]


def _fingerprint(v) -> str:
    if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str):
        return v[0] + "=" + _fingerprint(v[1])
    if isinstance(v, torch.Tensor):  # float values may differ in the last bits
        exact = "" if v.is_floating_point() or v.numel() > 4096 else v.tolist()
        return f"T{tuple(v.shape)}{v.dtype}{exact}"
    if isinstance(v, nn.Module):
        return f"M{type(v).__name__}{sum(p.numel() for p in v.parameters())}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_fingerprint(x) for x in v) + "]"
    if isinstance(v, PRIMITIVE + (float,)):
        return repr(v)
    return type(v).__name__
