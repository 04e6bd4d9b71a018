"""Evidence: what a student's code returned, carried out of the kernel as data.

A check decides nothing that student code can change only if it runs where student
code does not. Under ``nbgrader autograde`` the kernel therefore runs each check in
*record* mode (``COURSE_EVIDENCE=1`` in its environment): every call of student code
made through :func:`course.checks.call` is published as a display output of the test
cell, in the MIME type :data:`MIME`, holding the result (or the error raised) as
plain data. The grader's own process then runs the same check again in *replay*
mode (:func:`replaying`): the inputs and oracles are its own, and each call of
student code is answered from the recorded outputs instead of being run.

What travels is plain JSON (:mod:`.codec`: tensors as raw bytes, modules as
structure and weights, never a pickle); a call's outcome is decoded at the edge
into :class:`Returned` (its value) or :class:`Raised` (what it raised).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import nn

from ..graded import EVIDENCE as ENV
from .codec import (
    MAX_ELEMENTS,
    Missing,
    Opaque,
    Recorded,
    decode,
    decode_tensor,
    digest,
    encode,
    encode_tensor,
    is_plain,
    plain_config,
)

MIME = "application/vnd.course.evidence+json"

__all__ = ["ENV", "MAX_ELEMENTS", "MIME", "Log", "Missing", "Opaque", "Raised"]
__all__ += ["Recorded", "Returned", "decode", "digest", "encode", "invoke"]
__all__ += ["record", "replaying"]


class Returned(NamedTuple):
    """A call of student code that returned ``value``."""

    value: object


class Raised(NamedTuple):
    """A call of student code that raised: ``kind`` is ``"type"`` (not callable),
    ``"check"`` (a check inside it failed), ``"todo"`` (NotImplementedError) or
    ``"error"``; ``where`` is the student's line, as a note; ``mistakes``, for a
    check, the keys of the misconceptions its verdict names, comma-separated;
    ``code``: the student's line as it is written (what the hint reads);
    ``context``: the earlier lines of its cell that assign a name it uses."""

    kind: str
    ename: str = ""
    evalue: str = ""
    where: str = ""
    mistakes: str = ""
    code: str = ""
    context: str = ""


Outcome = Returned | Raised


def to_wire(outcome: Outcome, args) -> list:
    """An outcome as evidence data: ``["value", data]`` or ``["raised", ...]``."""
    if isinstance(outcome, Returned):
        return ["value", encode(outcome.value, args)]
    return ["raised", *outcome]


def from_wire(data: list, args) -> Outcome:
    """The outcome a record holds (a record that is no outcome fails to decode)."""
    if data[0] == "value":
        return Returned(decode(data[1], args))
    return Raised(*[str(x) for x in data[1:]])


# ---- the two modes -------------------------------------------------------------


class Log:
    """The recorded calls of one test cell, answered in order."""

    def __init__(self, records: list[dict]):
        self.records, self.pos = records, 0
        self.changed: list[tuple] = []  # (object, attribute, value before)

    def next(self, name: str, args, kwargs) -> Outcome:
        if self.pos >= len(self.records):
            raise Missing(name)
        record = self.records[self.pos]
        self.pos += 1
        if record.get("digest") != digest(name, args, kwargs):
            raise Missing(name)
        if record.get("rng"):
            torch.set_rng_state(decode_tensor(record["rng"]["__t"]))
        _apply(record.get("effects") or {}, args, self.changed)
        return from_wire(record["outcome"], args)

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


def invoke(
    fn: Callable | None, name: str, *, args, kwargs, run: Callable[[], Outcome]
) -> Outcome:
    """The outcome of a call of student code: :class:`Returned` or :class:`Raised`.

    ``run()`` makes the call live. When replaying, the outcome comes from the log;
    when recording, the live outcome is also published for the grader.
    """
    if _replay is not None:
        return _replay.next(name, args, kwargs)
    recording = os.environ.get(ENV) == "1"  # turning it off only loses evidence
    if not recording:
        return run()
    # The inputs as the grader will have them: before the call changes them.
    inputs, rng, marks = digest(name, args, kwargs), torch.get_rng_state(), _marks(args)
    outcome = run()
    call = (name, args, kwargs)
    _publish(record(call, outcome=outcome, rng_before=rng, marks=marks, inputs=inputs))
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
            out[str(i)] = {"": encode_tensor(arg)}
            continue
        state = arg.state_dict()
        out[str(i)] = {
            k: (json.loads(now[k]) if k == "config" else encode_tensor(state[k]))
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
                for k, v in plain_config(value).items():
                    if getattr(arg.config, k, None) != v and is_plain(v):
                        change(arg.config, k, v)
                continue
            new = decode_tensor(value["__t"])
            target = arg if key == "" else arg.state_dict(keep_vars=True).get(key)
            if isinstance(target, torch.Tensor):
                change(target, "data", new)


def record(
    call: tuple, *, outcome: Outcome, rng_before, marks: list, inputs: str
) -> dict:
    """One call ``(name, args, kwargs)`` as evidence: ``inputs``, the digest of its
    inputs taken before it ran; its outcome; what it changed."""
    name, args, kwargs = call
    rng = torch.get_rng_state()
    try:
        value = to_wire(outcome, args)
    except Exception as err:  # noqa: BLE001 - an unencodable result is a wrong one
        value = ["value", {"__obj": f"unreadable result ({type(err).__name__})"}]
    return {
        "name": name,
        "digest": inputs,
        "outcome": value,
        "rng": None if torch.equal(rng, rng_before) else encode_tensor(rng),
        "effects": _effects(args, marks),
    }


def _publish(data: dict) -> None:
    """Send a record out of the kernel, as a display output of the running cell."""
    from IPython.display import display

    display({MIME: data}, raw=True)
