"""Evidence: what a student's code returned, carried out of the kernel as data.

A check decides nothing that student code can change only if it runs where student
code does not. Under ``nbgrader autograde`` the kernel therefore runs each check in
*record* mode (``COURSE_EVIDENCE=1`` in its environment): every call of student code
made through :func:`course.checks.call` is published as a display output of the test
cell, in the MIME type :data:`MIME`, holding the result (or the error raised) as
plain data. The grader's own process then runs the same check again in *replay*
mode (:func:`replaying`): the inputs and oracles are its own, and each call of
student code is answered from the recorded outputs instead of being run.

Decoding never runs student code and never unpickles: tensors travel as raw bytes
with dtype and shape, modules as their structure and weights, rebuilt from
``torch.nn`` or ``transformers`` classes, or as :class:`Recorded` stand-ins.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import math
import os
from collections.abc import Callable

import torch
from torch import nn

MIME = "application/vnd.course.evidence+json"
ENV = "COURSE_EVIDENCE"
# Evidence is data from the kernel: absurd sizes fail their check, in bounded time
# and memory, before anything is allocated for them.
MAX_ELEMENTS = 1 << 26  # numbers in one tensor (bert-base's largest: 23 million)
MAX_DEPTH = 64  # nesting of lists, dicts and modules
MAX_CONFIG = 1 << 17  # any whole number in a model's config (sizes, ids)
MAX_LAYERS = 48
MAX_PARAMETERS = 1 << 28  # a rebuilt transformers model (bert-base: 110 million)
_PRIMITIVE = (bool, int, str, type(None))


class Missing(Exception):
    """Replay asked for a call that the kernel did not record."""


class Recorded(nn.Module):
    """A student-defined module, rebuilt as its structure and weights only."""

    def forward(self, *args, **kwargs):  # pragma: no cover - replay answers calls
        raise Missing("a recorded module cannot run")


class Opaque:
    """A value of a type the grader does not rebuild; only its type name is kept."""


def _tensor(t: torch.Tensor) -> dict:
    t = t.detach().cpu().contiguous()
    raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    dtype = str(t.dtype).removeprefix("torch.")
    return {"__t": [dtype, list(t.shape), base64.b64encode(raw).decode()]}


def _untensor(spec: list) -> torch.Tensor:
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
        state = {k: _tensor(v) for k, v in m.state_dict().items()}
        config = json.loads(m.config.to_json_string(use_diff=False))
        return {"__hf": [cls.__name__, config, state]}
    attrs = {
        k: encode(v, (), seen)
        for k, v in vars(m).items()
        if not k.startswith("_") and _plain(v)
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
    out = _tensor(p)
    out["grad"] = bool(getattr(p, "requires_grad", False))
    return out


def _plain(v) -> bool:
    if isinstance(v, _PRIMITIVE + (float,)):
        return True
    return isinstance(v, (tuple, list)) and all(_plain(x) for x in v)


def _ref(value, args) -> list | None:
    """``[i, path]`` if ``value`` is argument ``i`` or a submodule of it."""
    for i, arg in enumerate(args):
        if value is arg:
            return [i, ""]
        if isinstance(arg, nn.Module) and isinstance(value, nn.Module):
            for path, sub in arg.named_modules(remove_duplicate=False):
                if sub is value:
                    return [i, path]
    return None


def encode(value, args=(), seen: set | None = None):
    """``value`` as JSON-ready data; modules and tensors of ``args`` by reference."""
    seen = set() if seen is None else seen
    ref = _ref(value, args) if args else None
    if ref is not None:
        return {"__ref": ref}
    if isinstance(value, float):
        return value if math.isfinite(value) else {"__f": repr(value)}
    if isinstance(value, _PRIMITIVE):
        return value
    if id(value) in seen:
        return {"__obj": "a structure that contains itself"}
    seen = seen | {id(value)}
    if isinstance(value, torch.Tensor):
        return _tensor(value)
    if isinstance(value, torch.Size):
        return {"__size": list(value)}
    if isinstance(value, torch.dtype):
        return {"__dtype": str(value).removeprefix("torch.")}
    if isinstance(value, nn.Module):
        return _module(value, seen)
    if type(value).__name__ == "BatchEncoding":
        return {"__be": {str(k): encode(v, args, seen) for k, v in value.items()}}
    if type(value).__module__ == "numpy" and hasattr(value, "dtype"):
        return {"__np": _tensor(torch.as_tensor(value))}
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
        return _untensor(v)
    if key == "__ref":
        i, path = v
        return args[i].get_submodule(path) if path else args[i]
    simple = {
        "__f": float,
        "__size": torch.Size,
        "__dtype": lambda s: getattr(torch, s),
        "__np": lambda t: _untensor(t["__t"]).numpy(),
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
    model = cls(_bounded(config_cls.from_dict(_plain_config(config)))).eval()
    for key, spec in state.items():  # shapes may differ from what the config says
        owner_path, _, attr = key.rpartition(".")
        owner = model.get_submodule(owner_path)
        value = _untensor(spec["__t"])
        if attr in owner._parameters:
            owner._parameters[attr] = nn.Parameter(value, requires_grad=False)
        elif attr in owner._buffers:
            owner._buffers[attr] = value
    return model


def _plain_config(config) -> dict:
    """A config of plain values, every whole number within :data:`MAX_CONFIG`."""
    if not isinstance(config, dict):
        raise ValueError("not a config")
    for key, value in config.items():
        if isinstance(value, int) and not -1 <= value <= MAX_CONFIG:
            raise ValueError(f"a config with {key} = {value}")
        if isinstance(value, (list, dict)) and len(json.dumps(value)) > 1 << 16:
            raise ValueError(f"a config with a huge {key}")
    return config


def _bounded(config):
    """``config``, if the model it describes is one a course answer could build."""
    hidden = getattr(config, "hidden_size", 0) or 0
    layers = getattr(config, "num_hidden_layers", 0) or 0
    inner = getattr(config, "intermediate_size", 4 * hidden) or 0
    rows = sum(
        getattr(config, k, 0) or 0
        for k in ("vocab_size", "max_position_embeddings", "type_vocab_size")
    )
    size = rows * hidden + layers * (4 * hidden * hidden + 2 * hidden * inner)
    if layers > MAX_LAYERS or size > MAX_PARAMETERS:
        raise ValueError(f"a model of {layers} layers and about {size} parameters")
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
            value = None if t is None else _untensor(t["__t"])
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
    if isinstance(v, _PRIMITIVE + (float,)):
        return repr(v)
    return type(v).__name__


# ---- the two modes -------------------------------------------------------------


class Log:
    """The recorded calls of one test cell, answered in order."""

    def __init__(self, records: list[dict]):
        self.records, self.pos = records, 0
        self.changed: list[tuple] = []  # (object, attribute, value before)

    def next(self, name: str, args, kwargs):
        if self.pos >= len(self.records):
            raise Missing(name)
        record = self.records[self.pos]
        self.pos += 1
        if record.get("digest") != digest(name, args, kwargs):
            raise Missing(name)
        if record.get("rng"):
            torch.set_rng_state(_untensor(record["rng"]["__t"]))
        _apply(record.get("effects") or {}, args, self.changed)
        outcome = record["outcome"]
        if outcome[0] == "value":
            return ["value", decode(outcome[1], args)]
        return [str(x) for x in outcome]

    def undo(self) -> None:
        """Put back, latest first, what the replayed effects changed in the
        grader's objects: a check may hand the student a shared one (the oracle
        model), and what the student's call did to it must end with that check."""
        while self.changed:
            obj, attr, before = self.changed.pop()
            if before is _ABSENT:
                delattr(obj, attr)
            else:
                setattr(obj, attr, before)


_replay: Log | None = None


@contextlib.contextmanager
def replaying(records: list[dict]):
    """Answer every call of student code from ``records`` while the block runs."""
    global _replay
    saved, _replay = _replay, Log(records)
    try:
        yield _replay
    finally:
        _replay = saved


def invoke(fn: Callable | None, name: str, args, kwargs, run: Callable) -> list:
    """The outcome of a call of student code: ``["value", v]`` or ``["raised", ...]``.

    ``run()`` makes the call live. When replaying, the outcome comes from the log;
    when recording, the live outcome is also published for the grader.
    """
    if _replay is not None:
        return _replay.next(name, args, kwargs)
    recording = os.environ.get(ENV) == "1"  # turning it off only loses evidence
    rng, marks = torch.get_rng_state(), _marks(args) if recording else None
    outcome = run()
    if recording:
        _publish(record(name, args, kwargs, outcome, rng, marks))
    return outcome


def _marks(args) -> list:
    """Where each tensor or module argument's data lives, to see what a call changed."""

    def of(t: torch.Tensor) -> tuple:
        return (t.data_ptr(), tuple(t.shape), t._version)

    out = []
    for arg in args:
        if isinstance(arg, torch.Tensor):
            out.append({"": of(arg)})
        elif isinstance(arg, nn.Module):
            marks = {k: of(v) for k, v in arg.state_dict(keep_vars=True).items()}
            if hasattr(arg, "config") and hasattr(arg.config, "to_dict"):
                marks["config"] = json.dumps(arg.config.to_dict(), default=str)
            out.append(marks)
        else:
            out.append(None)
    return out


def _effects(args, before: list) -> dict:
    """What the call changed in its arguments, as data: ``{i: {key: value}}``."""
    out = {}
    for i, (arg, was) in enumerate(zip(args, before, strict=True)):
        if was is None:
            continue
        now = _marks([arg])[0]
        changed = [k for k in now if now[k] != was.get(k)]
        if not changed:
            continue
        if isinstance(arg, torch.Tensor):
            out[str(i)] = {"": _tensor(arg)}
            continue
        state = arg.state_dict()
        out[str(i)] = {
            k: (json.loads(now[k]) if k == "config" else _tensor(state[k]))
            for k in changed
            if k == "config" or k in state
        }
    return out


_ABSENT = object()


def _apply(effects: dict, args, changed: list) -> None:
    """Make the grader's arguments show what the student's call did to the kernel's;
    each change is noted in ``changed`` as ``(object, attribute, value before)``."""

    def change(obj, attr: str, value) -> None:
        changed.append((obj, attr, getattr(obj, attr, _ABSENT)))
        setattr(obj, attr, value)

    for i, changes in effects.items():
        arg = args[int(i)]
        for key, value in changes.items():
            if key == "config":
                for k, v in _plain_config(value).items():
                    if getattr(arg.config, k, None) != v and _plain(v):
                        change(arg.config, k, v)
                continue
            new = _untensor(value["__t"])
            target = arg if key == "" else arg.state_dict(keep_vars=True).get(key)
            if isinstance(target, torch.Tensor):
                change(target, "data", new)


def record(name, args, kwargs, outcome, rng_before, marks) -> dict:
    """One call as evidence: its inputs' digest, its outcome, what it changed."""
    rng = torch.get_rng_state()
    try:
        value = (
            ["value", encode(outcome[1], args)] if outcome[0] == "value" else outcome
        )
    except Exception as err:  # noqa: BLE001 - an unencodable result is a wrong one
        value = ["value", {"__obj": f"unreadable result ({type(err).__name__})"}]
    return {
        "name": name,
        "digest": digest(name, args, kwargs),
        "outcome": value,
        "rng": None if torch.equal(rng, rng_before) else _tensor(rng),
        "effects": _effects(args, marks),
    }


def _publish(data: dict) -> None:
    """Send a record out of the kernel, as a display output of the running cell."""
    from IPython.display import display

    display({MIME: data}, raw=True)
