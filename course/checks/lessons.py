"""What an exercise may not use: its :class:`Lesson`, declared once beside its checks.

Each notebook's check module declares ``LESSONS``, ``{exercise: Lesson}``. One
declaration serves both sides:

* in the kernel, a check runs the student's code inside :meth:`Lesson.enforced`:
  every library function the lesson names, and every module the answer may not
  call whole, raises :class:`~course.checks.calls.ShortcutUsed` (the student's
  first warning);
* in the grader's process, :mod:`course.grading.steps.scan.lessons` reads the
  answer's source against the same lesson (the verdict; code in the kernel can
  undo a block, it cannot change the grader's reading).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import types
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch

from ..i18n import say
from .calls import ShortcutUsed

_Tensor = torch.Tensor  # taken at import, before any student code runs

SOFTMAXES = {"softmax", "log_softmax", "softmin", "Softmax", "LogSoftmax", "Softmin"}
SOFTMAXES |= {"Softmax2d", "gumbel_softmax", "distributions"}
FUSED_ATTENTION = {"scaled_dot_product_attention", "multi_head_attention_forward"}
FUSED_ATTENTION |= {
    "MultiheadAttention",
    "TransformerEncoderLayer",
    "TransformerEncoder",
}
FUSED_ATTENTION |= {"Transformer", "TransformerDecoderLayer", "flash_attention"}
SOFTMAXES, FUSED_ATTENTION = frozenset(SOFTMAXES), frozenset(FUSED_ATTENTION)
#: transformers' own rotary code and K/V sharing (12 is about writing them)
ROTARY_CODE = frozenset(
    {"apply_rotary_pos_emb", "rotate_half", "ModernBertRotaryEmbedding"}
)
ROTARY_CODE |= {"LlamaRotaryEmbedding", "rotary_emb"}
KV_SHARING = FUSED_ATTENTION | {"repeat_kv"}

#: Where the names a lesson turns off live: modules, and (module, class) pairs.
OWNERS = (
    "torch",
    "torch.nn",
    "torch.nn.functional",
    "torch.special",
    "transformers.models.bert.modeling_bert",
    "transformers.models.llama.modeling_llama",
    "transformers.models.modernbert.modeling_modernbert",
    ("transformers.generation.utils", "GenerationMixin"),  # model.generate
)


@dataclass(frozen=True)
class Lesson:
    """What one exercise teaches, as what its answer may not use.

    Parameters
    ----------
    message : str
        The lesson, said with every verdict it gives.
    banned : frozenset of str
        Names the answer may not use: library functions and classes (a class is
        turned off by its ``forward``), under any owner or alias.
    whole : tuple of str
        Modules the answer may not call whole, each ``"<argument index>.<attribute
        path>"`` of the exercise's arguments (``*`` stands for every index or
        every layer of a list): ``"1.attention.self"`` in ``bert_layer(hidden,
        layer)``.
    allowed : frozenset of str, optional
        If given, the only attributes the answer may use (read from the source).
    """

    message: str
    banned: frozenset[str] = frozenset()
    whole: tuple[str, ...] = ()
    allowed: frozenset[str] | None = None

    def enforced(self, args: tuple = ()) -> contextlib.AbstractContextManager:
        """Turn the lesson's shortcuts off while the block runs.

        ``args`` are the arguments the exercise's function is called with, in
        order: the modules :attr:`whole` names are found in them.
        """
        targets = [t for name in sorted(self.banned) for t in _library(name)]
        targets += [(m, "forward") for path in self.whole for m in _modules(args, path)]
        return forbid(dict.fromkeys(targets), self.message)  # each once, in order


NONE = Lesson("")


@functools.cache
def _owners() -> tuple:
    owners = [_Tensor]
    for where in OWNERS:
        module, name = (where, None) if isinstance(where, str) else where
        owner = importlib.import_module(module)
        owners.append(getattr(owner, name) if name else owner)
    return tuple(owners)


@functools.cache  # the owners are fixed: each name is looked up once per kernel
def _library(name: str) -> tuple[tuple[object, str], ...]:
    """``(owner, attribute)`` to turn off for a banned ``name``: each function or
    method of that name, and each class's ``forward``."""
    targets = []
    for owner in _owners():
        found = getattr(owner, name, None)
        if inspect.isclass(found):
            targets.append((found, "forward"))
        elif callable(found) and not isinstance(found, types.ModuleType):
            targets.append((owner, name))
    return tuple(targets)


def _modules(args: tuple, path: str) -> Iterator[torch.nn.Module]:
    """The modules ``path`` (``"1.attention.self"``, ``"2.encoder.layer.*"``)
    names among ``args``."""
    first, *rest = path.split(".")
    found = list(args) if first == "*" else [args[int(first)]]
    for name in rest:
        if name == "*":
            found = [m for module in found for m in module]
        else:
            found = [getattr(module, name) for module in found]
    return (m for m in found if isinstance(m, torch.nn.Module))


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
