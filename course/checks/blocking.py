"""Shortcut blocking: library functions an exercise turns off while a student's
code runs (the student's first warning; the grader reads the source too,
:mod:`course.grading.steps.scan`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

import torch

from ..i18n import say
from .calls import ShortcutUsed

_Tensor = torch.Tensor  # taken at import, before any student code runs


@contextlib.contextmanager
def forbid(targets: Iterable[tuple[object, str]], why: str):
    """Make library shortcuts raise :class:`ShortcutUsed` while the block runs.

    Parameters
    ----------
    targets : iterable of (owner, attribute)
        E.g. ``[(torch, "softmax"), (self_attn, "forward")]``.
    why : str
        The lesson, said when the shortcut is used.
    """
    saved = []

    def blocked(*_args, **_kwargs):
        raise ShortcutUsed(say(why))

    for owner, attr in targets:
        saved.append((owner, attr, owner.__dict__.get(attr, _MISSING)))
        setattr(owner, attr, blocked)
    try:
        yield
    finally:
        for owner, attr, old in reversed(saved):
            if old is _MISSING:
                delattr(owner, attr)
            else:
                setattr(owner, attr, old)


_MISSING = object()


def no_forward(*modules: torch.nn.Module, lesson: str):
    """Forbid calling each module (its ``forward``) while the block runs."""
    return forbid([(m, "forward") for m in modules], lesson)


def softmax_forbidden(lesson: str):
    """Forbid torch's softmax functions while the block runs."""
    F = torch.nn.functional
    return forbid(
        [
            (torch, "softmax"),
            (F, "softmax"),
            (_Tensor, "softmax"),
            (torch.special, "softmax"),
            (torch.special, "log_softmax"),
            (torch.nn.Softmax, "forward"),
            (F, "log_softmax"),
            (torch, "log_softmax"),
            (_Tensor, "log_softmax"),
        ],
        lesson,
    )
