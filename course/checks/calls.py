"""The gateway to student code, and the verdict a failed check raises.

Every call a check makes of student code goes through :func:`call`, which turns a
crash into a readable verdict and, under autograde, makes the call evidence
(:mod:`.evidence`): the kernel records it, the grader replays it. Every check
raises :class:`CheckFailed` with a sentence written for the student, in the
course's language (:func:`course.i18n.say`); IPython shows that sentence alone,
never a traceback into this package or the test cell.

The student's code gets its own copy of every argument (:func:`private`): what it
does to them in place can neither change the check's truth, made from the
originals, nor reach a later check through a shared object (the course model).
"""

from __future__ import annotations

import copy
import linecache
import math
import re
import traceback
from collections.abc import Callable
from typing import NamedTuple

import torch

from ..i18n import N_, mistakes_of, say, sentences, with_keys
from . import evidence
from .evidence import Outcome, Raised, Returned


class CheckFailed(AssertionError):
    """A test cell's verdict, written for the student; ``mistakes``: the keys of
    the misconceptions it names (:func:`course.i18n.mistakes_of`)."""

    #: Where several mistakes each alone give the numbers ("X. Or: Y"): the keys
    #: of each; empty for any other verdict.
    alternatives: tuple[tuple[str, ...], ...] = ()

    def __init__(self, verdict: str = ""):
        super().__init__(verdict)
        self.mistakes = mistakes_of(verdict)

    def _render_traceback_(self):  # IPython shows this instead of a traceback
        return [f"CheckFailed: {self}"]


class ShortcutUsed(CheckFailed):
    """Raised when a check forbids a library shortcut and the answer used it."""


#: A second mistake's verdict, after the first one's.
ALSO = N_("Also: {verdict}")


class CaseVerdicts:
    """The verdicts of a check's parts, each part tried even after one failed.

    A check that tries several inputs (or compares several outputs of one call)
    runs each under ``with verdicts:``; a failed one no longer stops the rest, so
    an answer with two bugs hears of both (a raise on (B, H, T, d) inputs, a wrong
    scale that shows on (B, T, d) ones). :meth:`fail_if_any` then raises the first
    verdict, followed by each later one that names a mistake no earlier verdict
    named (at most ``most`` of them); a later "X. Or: Y" whose X was named is
    explained by it and left out.
    A shortcut, or anything but a verdict, stops the check at once.

    Examples
    --------
    ::

        verdicts = CaseVerdicts()
        for case in cases:
            with verdicts:
                _expect(fn, case)
        verdicts.fail_if_any()
    """

    def __init__(self, most: int = 2):
        self.failures: list[CheckFailed] = []
        self.most = most

    @property
    def said(self) -> tuple[str, ...]:
        """The keys of the mistakes the verdicts so far name: a later case's
        diagnosis (:func:`~course.checks.mistaken.mistaken`'s ``said``) leaves
        them out of a combination, so that it says only what is new."""
        return tuple(k for failed in self.failures for k in failed.mistakes)

    def __enter__(self) -> CaseVerdicts:
        return self

    def __exit__(self, kind, err, _tb) -> bool:
        if kind is None or not issubclass(kind, CheckFailed):
            return False
        if isinstance(err, ShortcutUsed):
            return False
        self.failures.append(err)
        return True

    def fail_if_any(self) -> None:
        """Raise the combined verdict, if any input failed."""
        if not self.failures:
            return
        first, *later = self.failures
        named = set(first.mistakes)
        parts = [str(first)]
        kept = list(_parts(first))
        for part in (part for err in later for part in _parts(err)):
            if len(parts) > self.most:
                break
            if any(set(keys) <= named for keys in part.alternatives):
                continue  # "X. Or: Y" after X was named: X gives these numbers too
            if set(part.keys) - named:  # of a combined verdict: only what is new
                parts.append(say(ALSO, verdict=part.text))
                kept.append(part)
                named |= set(part.keys)
        if len(parts) == 1:
            raise first
        keys = [k for err in self.failures for k in err.mistakes if k in named]
        combined = CheckFailed(with_keys(sentences(*parts), keys))
        combined.parts = kept
        raise combined


class Part(NamedTuple):
    """One verdict of a combined one: its text, the keys it names, and (for "X.
    Or: Y") the keys of each alternative."""

    text: str
    keys: tuple[str, ...]
    alternatives: tuple[tuple[str, ...], ...] = ()


def _parts(err: CheckFailed) -> list[Part]:
    """The verdicts a combined one was made of (its first, then each "Also:"), or
    the verdict itself."""
    parts = getattr(err, "parts", None)
    return parts or [Part(str(err), err.mistakes, err.alternatives)]


def both(first: str, *others: str) -> str:
    """One verdict naming the mistakes an answer makes at once: ``first``, then
    "Also:" each of ``others`` (catalog sentences; every key named)."""
    return sentences(say(first), *(say(ALSO, verdict=say(o)) for o in others))


def fail(message: str, /, **fields) -> None:
    """Raise :class:`CheckFailed` with ``message`` in the course's language.

    ``message`` is an English catalog entry (``{field}`` templates filled from
    ``fields``) or a sentence already made by :func:`course.i18n.say`.
    """
    raise CheckFailed(say(message, **fields))


def score_line(passed: bool, message: str) -> None:
    """Print a one-line verdict (used by checks that pass with a remark)."""
    print(("✓ " if passed else "✗ ") + say(message))


#: A one-value conversion (.item(), int(), float()) of a value per example.
ITEM_ON_BATCH = N_(
    " Hint: .item() (like float() and int()) takes a tensor of one element, "
    "and this one holds a value per example of the batch. Keep it a tensor "
    "and work on the whole batch at once (torch.where, comparisons, "
    "indexing).",
    mistake="item-on-batch",
)
#: Torch error fragments and what they usually mean in this course.
#: torch's error where .view meets a tensor it cannot view (not contiguous).
VIEW_FAILED = "view size is not compatible"
HINTS = {
    VIEW_FAILED: N_(
        " Hint: after a transpose the tensor is not contiguous; call "
        ".contiguous() before .view, or use .reshape."
    ),
    "must match the size of tensor b": N_(
        " Hint: these shapes do not broadcast: torch lines them up from the last "
        "dim, and each pair of sizes must be equal or 1.",
        mistake="broadcast",
    ),
    "must be a 3D tensor": N_(
        " Hint: torch.bmm takes 3-D tensors only; @ (torch.matmul) broadcasts over "
        "any leading dims: (T, d), (B, T, d) and (B, H, T, d) alike.",
        mistake="bmm-3d",
    ),
    "self must be a matrix": N_(
        " Hint: torch.mm multiplies 2-D matrices only; @ (torch.matmul) treats "
        "every leading dim as a batch dim, so (T, D), (B, T, D) and more all work.",
        mistake="mm-2d",
    ),
    "Sizes of tensors must match except in dimension": N_(
        " Hint: torch.cat joins along one dim, and every other dim must agree. The "
        "piece you append has another size there: with a batch, the new tokens are "
        "(B, 1), one per example (argmax over the last dim, keepdim=True), not a "
        "single number.",
        mistake="cat-sizes",
    ),
    "no ellipsis was given": N_(
        " Hint: this einsum names every dim, so it fits one number of dims only; "
        'write the leading dims as ... ("...td,ed->...te") so that batch dims pass '
        "through.",
        mistake="einsum-no-ellipsis",
    ),
    "cannot be multiplied": N_(
        " Hint: check which side needs a transpose; nn.Linear stores its "
        "weight as (out_features, in_features)."
    ),
    "and 'tuple'": N_(
        " Hint: one operand is a tuple: a call that returns several values (a "
        "module returning (out, probs), say) must be unpacked, out, _ = ..., "
        "before its result is added or multiplied.",
        mistake="tuple-operand",
    ),
    "does not match the length of the desired ordering": N_(
        " Hint: permute lists every dim, so it fits one number of dims only, and "
        "this input has another. To swap two dims whatever comes before them, "
        "use .transpose(-2, -1) (or .mT) and count dims from the end.",
        mistake="permute-ndim",
    ),
    "Dimension out of range": N_(
        " Hint: this dim does not exist on the input. A dim counted from the front "
        "(dim=3, transpose(1, 2)) fits one number of dims only; counted from the "
        "end (dim=-1, transpose(-2, -1)) the same line works on (T, d), (B, T, d) "
        "and (B, H, T, d) alike.",
        mistake="dim-from-front",
    ),
    "cannot be converted to Scalar": ITEM_ON_BATCH,
    "only one element tensors can be converted to Python scalars": ITEM_ON_BATCH,
    "values to unpack": N_(
        " Hint: this line unpacks a shape into a fixed number of names, and the "
        "input has another number of dims ({shapes}). Take only the dims you "
        "need, counted from the end: d = x.shape[-1], or *batch, T, D = x.shape.",
        mistake="unpack-shape",
    ),
    "Boolean value of Tensor with more than one value is ambiguous": N_(
        " Hint: if, and, or and not need one True or False, and this tensor holds "
        "one per element (a value per example of the batch, say). Use .all() or "
        ".any() for one answer, or torch.where to choose per element.",
        mistake="bool-of-tensor",
    ),
    "out of bounds for dimension 0": N_(
        " Hint: that index runs along dim 0, which is the batch for (B, T, ...) "
        "inputs. To pick or reorder tokens, index dim 1: x[:, idx].",
        mistake="index-batch-dim",
    ),
    "is invalid for input of size": N_(
        " Hint: view and reshape keep the number of values, so the sizes asked for "
        "must multiply to the tensor's. Read them from the tensor's own .shape, and "
        "check that the dims you merge are next to each other.",
        mistake="reshape-size",
    ),
    "'NoneType' object": N_(
        " Hint: a value on that line is None: an optional argument left at its "
        "default (a mask, say, where None means no mask). Check for None before "
        "using it: if mask is not None: ...",
        mistake="none-default",
    ),
    "step must be greater than zero": N_(
        " Hint: a torch tensor takes no negative step, so [::-1] (a numpy and list "
        "habit) fails on one. Reverse it with .flip(dims), or ask for the largest "
        "first: torch.topk, or argsort(descending=True).",
        mistake="negative-step",
    ),
    "iteration over a 0-d tensor": N_(
        " Hint: a 0-d tensor (one number, no dims left) cannot be looped over. "
        "squeeze() removes every dim of size 1, so a result of one element, such "
        "as topk's with k = 1, loses them all: squeeze only the dim you mean "
        "(squeeze(0)), or keep a list with .reshape(-1).tolist().",
        mistake="iterate-0d",
    ),
    "cannot be converted to type c10::Half": N_(
        " Hint: float16 holds numbers up to 65504 only, so a fill such as -1e9 "
        "cannot be stored in a float16 tensor. Fill with "
        "torch.finfo(scores.dtype).min, or compute in float32 and convert back.",
        mistake="half-fill-overflow",
    ),
}
#: The view hint where the failing line (or a name it uses) comes of an expand.
VIEW_EXPANDED = N_(
    " Hint: expand copies nothing: its repeated entries are the same memory seen "
    "again, which .view cannot merge into one dim. Use .reshape (it copies where "
    "it must), or .contiguous() before .view."
)
#: The broadcast hint where the failing line uses .T on a tensor of 3 dims or more.
T_BROADCAST = N_(
    " Hint: on more than 2 dims .T reverses them all ((B, H, T, d) becomes (d, T, "
    "H, B)); .transpose(-2, -1), or .mT, swaps the last two.",
    mistake="dot-T-batched",
)
#: The broadcast hint where the failing line reduces without keepdim.
KEEPDIM_BROADCAST = N_(
    " Hint: the reduction on that line drops its dim, so the result no longer "
    "lines up with the tensor it came from; keepdim=True keeps it as size 1.",
    mistake="keepdim",
)
_REDUCTION = re.compile(
    r"\.(sum|max|amax|mean|logsumexp|norm)\(|torch\.(sum|max|amax)\("
)
#: The broadcast hint where the call was given a mask.
MASK_BROADCAST = N_(
    " Hint: these shapes do not broadcast; a mask needs dims of size 1 where the "
    "scores have heads (and queries): (B, T) becomes (B, 1, 1, T) and (B, T, T) "
    "becomes (B, 1, T, T) to meet (B, H, T, T) scores.",
    mistake="mask-dims",
)
#: The broadcast hint where a (T, T) mask is indexed as a batched (B, T, T) one.
MASK_UNBATCHED = N_(
    " Hint: this mask is (T, T), one for every example, and the line indexes it "
    "as a batched (B, T, T) one: mask[:, None] makes it (T, 1, T). A (T, T) mask "
    "meets (B, H, T, T) scores as it is (or as mask[None, None]); give only a "
    "(B, T, T) mask its head dim, mask[:, None], and tell them apart by mask.dim().",
    mistake="mask-unbatched",
)
_BATCH_INDEXED = re.compile(r"\[\s*:\s*,\s*None")
#: A shape unpacked into too few names, in a call given a mask.
MASK_ADDED_DIMS = N_(
    " Hint: the tensor has more dims than this line unpacks, so a broadcast "
    "before it added some. A mask must line up with the (B, H, T, T) scores: "
    "index a (B, T, T) mask as mask[:, None] (B, 1, T, T), and a (B, T) one as "
    "mask[:, None, None, :]; a mask[None, None] in front of a batched mask makes "
    "the scores 5-D.",
    mistake="mask-added-dims",
)
#: A reshape that fails for having too many values, in a call given a mask.
MASK_GREW = N_(
    " Hint: the tensor holds more values than the shape asks for, so a broadcast "
    "before this line grew it. A mask must line up with the scores: a (B, T, T) "
    "mask against (B, H, T, T) scores pairs B with H; give it a head dim, "
    "mask[:, None].",
    mistake="mask-grew",
)


#: Sizes of the course's models (MiniLM: 6 layers, 12 heads of 32, width 384;
#: bert-base: 12 heads of 64, width 768; their feed-forward widths).
MODEL_SIZES = frozenset({6, 12, 32, 64, 384, 768, 1536, 3072})
#: A reshape that fails where its line asks for one of those typed in.
TYPED_SIZE = N_(
    " Hint: this line asks for {sizes}, typed into the code: a size of the "
    "course's models (12 heads, a head size of 32 or 64, a width of 384 or 768). "
    "The test's inputs have other sizes; read each size from the arguments or "
    "from the tensor's own .shape (d = D // num_heads, say).",
    mistake="typed-size",
)


#: Shapes that do not broadcast where one size is a number typed into the cell.
FIXED_SIZE = N_(
    " Hint: {size}, one of these sizes, is typed into your cell, and this input "
    "has {other} there: a tensor made once at a fixed size (a causal mask for "
    "{size} tokens, say) fits only inputs of that size. Make it from the input's "
    "own shape on each call (T = scores.shape[-1]).",
    mistake="fixed-size",
)
_SIZES = re.compile(
    r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)"
)


#: A reshape that asks for one input's length where the tensor has another's.
OTHER_LENGTH = N_(
    " Hint: the shape asks for another length than the tensor has: the inputs "
    "differ in length (queries Tq, keys and values Tk, say), and a size read "
    "from one of them was used for another. Read each tensor's sizes from its "
    "own .shape.",
    mistake="length-of-another",
)


#: The hint where the student's own ``assert`` failed.
OWN_ASSERT = N_(
    " Hint: this assert is your own, and the test's inputs ({shapes}) are ones "
    "the exercise allows: what it assumes does not hold for every input. Read "
    "the exercise's shapes again; queries and keys, for one, may differ in length.",
    mistake="own-assert",
)


def _shapes(inputs: tuple) -> str:
    """The tensors' shapes among ``inputs``, e.g. ``(2, 5, 8), (2, 7, 8)``."""
    return ", ".join(
        str(tuple(v.shape)) for v in inputs if hasattr(v, "shape") and v.ndim
    )


def _hint(
    error: str, inputs: tuple, code: str = "", ename: str = "", context: str = ""
) -> str:
    """The hint for what torch said (empty if none). For a shape error it answers
    the situation present on the failing line ``code`` (or in the ``context`` of
    the lines that assign its names): a model size typed into a failing reshape,
    a mask in a call given one (token types of 0 and 1 are no mask), a ``.T`` on
    a batched tensor, a reduction without ``keepdim``. An ``assert`` of the
    student's own gets the input shapes it refused."""
    if ename == "AssertionError" and code.startswith("assert"):
        return say(OWN_ASSERT, shapes=_shapes(inputs))
    key = next((key for key in HINTS if key in error), None)
    if key is None:
        return ""
    if key == "values to unpack":
        if ".shape" not in code and ".size()" not in code:
            return ""
        if re.match("too many", error) and any(map(_is_mask, inputs)):
            return say(MASK_ADDED_DIMS)
        return say(HINTS[key], shapes=_shapes(inputs))
    if key == VIEW_FAILED and ".expand(" in code + context:
        return say(VIEW_EXPANDED)
    reshaped = key == "is invalid for input of size"
    numbers = _typed(code, context)
    typed = [n for n in numbers if n in MODEL_SIZES]
    if reshaped and typed:
        return say(TYPED_SIZE, sizes=", ".join(map(str, typed)))
    if reshaped and _other_length(error, inputs):
        return say(OTHER_LENGTH)
    if reshaped and _grew(error) and any(map(_is_mask, inputs)):
        return say(MASK_GREW)
    if key == "must match the size of tensor b":
        found = _SIZES.search(error)
        sizes = [int(n) for n in found.groups()] if found else []
        # a length or width typed in: 8 or more (2 or 4 is more often a half, a dim)
        fixed = [n for n in numbers if n in sizes and n >= 8]
        if fixed and len(set(sizes)) == 2:
            other = next(n for n in sizes if n != fixed[0])
            return say(FIXED_SIZE, size=fixed[0], other=other)
        masks = [v for v in inputs if _is_mask(v)]
        if masks and "mask" in (code + context).lower():
            lengths = {v.shape[-2] for v in inputs if getattr(v, "ndim", 0) >= 3}
            square = any(m.ndim == 2 and {*m.shape} <= lengths for m in masks)
            if square and _BATCH_INDEXED.search(code + context):
                return say(MASK_UNBATCHED)
            return say(MASK_BROADCAST)
        batched = any(getattr(v, "ndim", 0) > 2 for v in inputs)
        if batched and re.search(r"\.T\b", code):
            return say(T_BROADCAST)
        if _REDUCTION.search(code) and "keepdim" not in code:
            return say(KEEPDIM_BROADCAST)
    return say(HINTS[key])


_RESHAPE = re.compile(r"shape '\[([\d, -]*)\]' is invalid for input of size (\d+)")


def _grew(error: str) -> bool:
    """Whether a failed reshape's input holds a whole multiple (2 or more) of the
    values its shape asks for: what a broadcast that added a dim leaves."""
    found = _RESHAPE.search(error)
    if not found:
        return False
    sizes = [int(n) for n in found.group(1).split(",") if n.strip()]
    asked, size = math.prod(sizes), int(found.group(2))
    return asked > 0 and size > asked and size % asked == 0  # -1 or 0: not asked


def _other_length(error: str, inputs: tuple) -> bool:
    """Whether a failed reshape asks for one input's length where the tensor has
    another's: the values it holds and those asked for stand in the ratio of two
    inputs' lengths (dim -2), as when keys of length Tk are viewed with the
    queries' Tq."""
    found = _RESHAPE.search(error)
    if not found:
        return False
    sizes = [int(n) for n in found.group(1).split(",") if n.strip()]
    asked, size = math.prod(sizes), int(found.group(2))
    lengths = {v.shape[-2] for v in inputs if getattr(v, "ndim", 0) >= 2}
    return asked > 0 and any(  # size / asked = the length held / the one asked
        size * wanted == asked * held
        for wanted in lengths
        for held in lengths
        if wanted != held
    )


def _is_mask(value) -> bool:
    """A tensor of 2 dims or more that holds only what masks hold: booleans,
    0 and 1, or 0 and large negative numbers."""
    import torch

    if not isinstance(value, torch.Tensor) or value.ndim < 2 or not value.numel():
        return False
    if value.dtype == torch.bool:
        return True
    kept = value.unique()
    return bool(
        torch.isin(kept, torch.tensor([0, 1], dtype=kept.dtype)).all()
        or ((kept == 0) | (kept <= -1e4)).all()
    )


def _student_frame(tb) -> tuple[str, str, str]:
    """The last frame of the traceback that lies in notebook code: a short note,
    its line as written, and the earlier lines of its cell that assign a name the
    line uses (``ext = mask[:, None] ...``, ``d = 64``), one level deep."""
    frames = [
        f
        for f in traceback.extract_tb(tb)
        if "ipykernel" in f.filename or "<" in f.filename
    ]
    if not frames:
        return "", "", ""
    f = frames[-1]
    code = (f.line or "").strip()
    note = say(
        " (in your code: `{code}`, line {lineno} of its cell)",
        code=code,
        lineno=f.lineno,
    )
    return note, code, _assigning(code, linecache.getlines(f.filename)[: f.lineno - 1])


_ASSIGNED = re.compile(r"\s*([\w.]+)\s*=(?!=)(.*)")
_INT = re.compile(r"(?<![\w.])(\d+)(?![\w.])")


def _assigning(code: str, cell: list[str], depth: int = 2) -> str:
    """The lines of ``cell`` that assign a name (``d``, ``self.heads``) the line
    ``code`` uses, the last assignment of each, and (``depth`` 2) the lines that
    assign the names those use (``mask = torch.ones(block, block)`` and
    ``block = 64``), as one string."""
    found: dict[str, str] = {}
    for line in cell:
        assigned = _ASSIGNED.match(line)
        if assigned and re.search(rf"(?<![\w.]){re.escape(assigned[1])}\b", code):
            found[assigned[1]] = line.strip()
    lines = list(found.values())
    if depth > 1 and lines:
        deeper = _assigning("\n".join(lines), cell, depth - 1).splitlines()
        lines += [line for line in deeper if line not in lines]
    return "\n".join(lines)


def _typed(code: str, context: str) -> list[int]:
    """The sizes (2 or more) that the line ``code`` asks for as numbers: written
    on it, or as the whole value of a name in its ``context`` (``d = 64``)."""
    sizes = [int(n) for n in _INT.findall(code.split("#")[0])]  # not its comment
    for line in context.splitlines():
        number = re.fullmatch(r"[\w.]+\s*=\s*(\d+)\s*(#.*)?", line)
        sizes += [int(number[1])] if number else []
    return list(dict.fromkeys(n for n in sizes if n >= 2))


def call(
    fn: Callable,
    *args,
    name: str | None = None,
    probe: Callable | None = None,
    cache: dict | None = None,
    share: bool = False,
    **kwargs,
):
    """Call a student's function, turning any crash into a readable verdict.

    Under autograde the call and its result are evidence (:mod:`.evidence`): the
    kernel records them, the grader replays them.

    Parameters
    ----------
    fn : callable
        The student's function or class.
    *args, **kwargs
        Passed on.
    name : str, optional
        How to name ``fn`` in messages (default: its ``__name__``).
    probe : callable, optional
        ``probe(result, *args)`` turns the result into plain data where it is made
        (e.g. what a matplotlib Axes shows); the check gets that data.
    cache : dict, optional
        Reuse an earlier outcome of the same call (``fn`` and inputs) kept here.
    share : bool, optional
        Hand ``fn`` the check's own objects, not copies: only for a check that
        asks for the very object (01's ``query_linear``) or whether the original
        was left as it was (``with_max_positions``), and takes its truth before
        the call.
    """
    name = name or getattr(fn, "__name__", None) or N_("your function")
    if not share:
        memo: dict = {}
        args = tuple(private(v, memo) for v in args)
        kwargs = {k: private(v, memo) for k, v in kwargs.items()}

    def run() -> Outcome:
        key = (id(fn), evidence.digest(name, args, kwargs))
        if cache is not None and key in cache and cache[key][0] is fn:
            return cache[key][1]
        outcome = _run(fn, args, kwargs, probe)
        if cache is not None:
            cache[key] = (fn, outcome)
        return outcome

    outcome = evidence.invoke(fn, name, args=args, kwargs=kwargs, run=run)
    if isinstance(outcome, Returned):
        return outcome.value
    kind, ename, evalue, where, mistakes, code, context = outcome
    if kind == "type":
        fail(
            "`{name}` should be a function, but it is a {ename}.",
            name=name,
            ename=ename,
        )
    if kind == "check":
        raise CheckFailed(with_keys(evalue[:1000], mistakes.split(",")))
    if kind == "todo":
        fail(
            "`{name}` is not written yet: it still raises NotImplementedError.",
            name=name,
        )
    hint = _hint(evalue, (*args, *kwargs.values()), code, ename, context)
    fail(
        "`{name}` raised {ename}: {error}{where}{hint}",
        name=name,
        ename=ename,
        error=evalue[:500],  # torch's own words, in English
        where=where[:300],
        hint=hint,
    )


def call_naming(fn: Callable, *args, name: str, case: str, **fields):
    """Call a student's function like :func:`call`; should it fail, the verdict
    first names the input that made it fail.

    Parameters
    ----------
    fn : callable
        The student's function.
    *args
        Passed on.
    name : str
        How to name ``fn`` in messages.
    case : str
        A catalog sentence (marked with ``N_``) naming the input and what it needs,
        ending in ``{verdict}``: the call's own verdict follows it.
    **fields
        The sentence's other ``{field}`` values.
    """
    try:
        return call(fn, *args, name=name)
    except CheckFailed as err:
        fail(case, verdict=str(err), **fields)


def runs(fn: Callable, *args, name: str) -> bool:
    """Whether the student's ``fn(*args)`` returns (anything) without raising: a
    check's probe for which input made a call fail.

    Parameters
    ----------
    fn : callable
        The student's function.
    *args
        Passed on (copies, as :func:`call` gives them).
    name : str
        How to name ``fn`` (as :func:`call` does).
    """
    try:
        call(fn, *args, name=name)
    except CheckFailed:
        return False
    return True


def private(value, memo: dict | None = None):
    """A deep copy of ``value`` for the student's code to have.

    Tensors keep their views' shared storage; modules keep their hooks (a closure
    is shared: the copy's calls reach the check's watch) and a ``forward`` turned
    off stays off, also after the check's block ends; a ``torch.Generator`` keeps
    its state; a tensor inside an autograd graph is detached (same values, same
    ``requires_grad``). A tokenizer is handed over as it is (a copy of its
    vocabulary takes 0.1 s: the check that hands one over reads it before the
    call), and so is what cannot be copied (a Python generator).

    Parameters
    ----------
    value : object
        One argument of a call.
    memo : dict, optional
        Shared by the copies of one call's arguments: an object passed twice stays
        one object.
    """
    if any(c.__name__ == "PreTrainedTokenizerBase" for c in type(value).__mro__):
        return value
    if isinstance(value, torch.Tensor) and not value.is_leaf:
        return value.detach().clone().requires_grad_(value.requires_grad)
    try:
        return copy.deepcopy(value, {} if memo is None else memo)
    except (RuntimeError, TypeError):
        return value


def _run(fn, args, kwargs, probe) -> Outcome:
    """Call ``fn`` live: what it returned, or what it raised."""
    if not callable(fn):
        return Raised("type", type(fn).__name__)
    try:
        value = fn(*args, **kwargs)
        return Returned(probe(value, *args) if probe else value)
    except CheckFailed as err:
        return Raised("check", evalue=str(err), mistakes=",".join(err.mistakes))
    except NotImplementedError:
        return Raised("todo")
    except Exception as err:  # noqa: BLE001 - any crash becomes feedback
        where, code, context = _student_frame(err.__traceback__)
        return Raised(
            "error", type(err).__name__, str(err), where, code=code, context=context
        )


def given(value, name: str):
    """A value the notebook computed (e.g. one head's Q), taken as evidence."""
    return call(lambda: value, name=name)
