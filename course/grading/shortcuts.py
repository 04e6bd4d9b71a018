"""Shortcuts, read from the answers' source in the grader's process.

The checks turn library shortcuts off inside the kernel while an answer runs; that
is the student's first warning, and code in the kernel can undo it. This module
decides the same question out of the kernel, from the source of the answer cells:

* **An allow-list for every answer.** Answers may use public names of the modules
  the course needs (:data:`MODULES`), the builtins in :data:`BUILTINS` and their own
  names. A private or low-level route (``torch._softmax``, ``torch.ops.aten``,
  ``torch._C``, ``x._values``), a dynamic one (``getattr(torch, name)``, ``eval``)
  or another module is outside it.
* **The lesson of each exercise** (:data:`LESSONS`): names it turns off
  (``softmax`` for softmax by hand, fused attention for attention by hand) and the
  modules an answer may not call whole (``self_attn(hidden)`` in 06).

An exercise's code is its answer cell plus every student cell that defines a name
it uses, transitively, so a helper in another cell counts where it is called.
"""

from __future__ import annotations

import ast
import builtins

from nbformat import NotebookNode

from ..checks import (
    debugging,
    heads,
    layer,
    oracles,
    outputs,
    positions,
    softmax,
    transformer,
)
from ..i18n import N_, say
from .enames import SHORTCUT, TAMPERED

MODULES = {"torch", "math", "numpy", "random", "matplotlib", "collections"}
MODULES |= {"itertools", "functools", "typing", "dataclasses", "copy", "transformers"}
MODULES |= {"course.models", "course.data", "course.viz", "__future__"}
LOW_LEVEL = ("torch.ops", "torch.library", "torch.utils.cpp_extension", "torch.jit")
BUILTINS = {"abs", "all", "any", "bool", "callable", "dict", "divmod", "enumerate"}
BUILTINS |= {"filter", "float", "format", "frozenset", "getattr", "hasattr", "int"}
BUILTINS |= {"isinstance", "issubclass", "iter", "len", "list", "map", "max", "min"}
BUILTINS |= {"next", "object", "pow", "print", "property", "range", "repr", "reversed"}
BUILTINS |= {"round", "set", "slice", "sorted", "str", "sum", "super", "tuple", "type"}
BUILTINS |= {"zip", "staticmethod", "classmethod", "NotImplemented", "Ellipsis"}
BUILTINS |= {"True", "False", "None", "print"}
DYNAMIC_MODULES = {"builtins", "importlib", "ctypes", "gc", "inspect", "types"}
DYNAMIC_MODULES |= {"marshal", "pickle", "code", "codeop", "runpy", "IPython"}
DYNAMIC_MODULES |= {"ipykernel", "traitlets", "nbgrader", "dill", "cloudpickle"}
HOOKS = {"modules", "meta_path", "path_hooks", "settrace", "setprofile", "_getframe"}
HOOKS |= {"excepthook", "displayhook", "addaudithook", "f_globals", "f_locals"}
HOOKS |= {"f_back", "f_builtins", "tb_frame", "gi_frame", "cr_frame"}
DUNDERS = {"__init__", "__name__", "__call__", "__len__", "__repr__", "__class__"}
SOFTMAXES = {"softmax", "log_softmax", "softmin", "Softmax", "LogSoftmax", "Softmin"}
SOFTMAXES |= {"Softmax2d", "gumbel_softmax", "distributions"}
FUSED = {"scaled_dot_product_attention", "multi_head_attention_forward"}
FUSED |= {"MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder"}
FUSED |= {"Transformer", "TransformerDecoderLayer", "flash_attention"}
LAYER = ("1", "1.attention", "1.attention.self", "1.attention.output")
LAYER += ("1.intermediate", "1.output")
USES = N_("uses `{text}`. {lesson}")  # a name the exercise's lesson turns off

#: What softmax by hand may use: arithmetic, reductions, shapes and dtypes. Anything
#: else (softmax under any name, fused attention, torch.distributions, ...) is out.
BY_HAND_SOFTMAX = {"exp", "exp_", "log", "sum", "max", "amax", "min", "amin", "mean"}
BY_HAND_SOFTMAX |= {"logsumexp", "clamp", "clamp_min", "clip", "where", "maximum"}
BY_HAND_SOFTMAX |= {"minimum", "isfinite", "isinf", "isnan", "nan_to_num", "sub"}
BY_HAND_SOFTMAX |= {"sub_", "add", "mul", "div", "div_", "neg", "true_divide", "abs"}
BY_HAND_SOFTMAX |= {"float", "double", "half", "to", "type_as", "dtype", "shape"}
BY_HAND_SOFTMAX |= {"size", "dim", "ndim", "values", "indices", "unsqueeze"}
BY_HAND_SOFTMAX |= {"squeeze", "expand", "expand_as", "reshape", "view", "transpose"}
BY_HAND_SOFTMAX |= {"permute", "movedim", "contiguous", "clone", "detach", "numel"}
BY_HAND_SOFTMAX |= {"zeros_like", "ones_like", "full_like", "tensor", "as_tensor"}
BY_HAND_SOFTMAX |= {"finfo", "inf", "float16", "float32", "float64", "bfloat16"}
BY_HAND_SOFTMAX |= {"masked_fill", "broadcast_to", "item", "tolist", "keepdim"}
BY_HAND_SOFTMAX |= {"sqrt", "pow", "e", "mT", "T", "new_zeros", "new_ones"}

#: exercise -> (names it turns off, modules it may not call whole, the lesson).
#: A module is ``"<parameter index>.<attribute path>"``; ``*`` stands for an index.
LESSONS = {
    "softmax": (SOFTMAXES | FUSED, (), softmax.BY_HAND, BY_HAND_SOFTMAX),
    "project_head": ((), ("1",), heads.SLICE),
    "pooler": ((), ("0.pooler",), outputs.POOLER),
    "head_attention": (FUSED, ("1",), oracles.BY_HAND),
    "multi_head_attention": (FUSED, ("1",), oracles.BY_HAND),
    "embeddings_forward": ((), ("2",), layer.BY_HAND),
    "attention_block": (FUSED, ("1", "1.self", "1.output"), layer.BY_HAND),
    "feed_forward": ((), ("1", "1.intermediate", "1.output"), layer.BY_HAND),
    "bert_layer": (FUSED, LAYER, layer.BY_HAND),
    "bert_encoder": (
        FUSED,
        ("2", "2.encoder", "2.embeddings", "2.encoder.layer.*"),
        layer.BY_HAND,
    ),
    "causal_attention": (FUSED, (), positions.CAUSAL),
    "MultiHeadSelfAttention": (FUSED, (), transformer.BUILD),
    "EncoderBlock": (FUSED, (), transformer.BUILD),
    "chunked_attention": (FUSED, (), debugging.FUSED),
}


def student_cells(nb: NotebookNode) -> list[NotebookNode]:
    """Code cells a student can write: answer cells and cells they added."""
    out = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and (meta.get("solution") or not meta):
            out.append(cell)
    return out


def _parse(source: str) -> ast.Module:
    lines = [ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


def _defined(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        for target in getattr(node, "targets", [getattr(node, "target", None)]):
            names |= {
                n.id for n in ast.walk(target or ast.Pass()) if isinstance(n, ast.Name)
            }
    return names


def imports(trees: list[ast.Module]) -> dict[str, str]:
    """``{alias: dotted name}`` of every import in ``trees``."""
    out = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    out[a.asname or a.name.split(".")[0]] = (
                        a.asname and a.name or a.name.split(".")[0]
                    )
            elif isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _chain(node: ast.AST) -> list[str] | None:
    """``a.b[0].c`` as ``["a", "b", "*", "c"]``; None if not rooted at a name."""
    parts = []
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        parts.append(node.attr if isinstance(node, ast.Attribute) else "*")
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id] + parts[::-1]


class _Reader(ast.NodeVisitor):
    """What one exercise's code uses that its lesson or the allow-list forbids."""

    def __init__(self, names: dict[str, str], own: set[str], lesson: tuple):
        self.names, self.own = names, own
        self.banned, self.whole, self.lesson = lesson[:3]
        self.allowed = lesson[3] if len(lesson) > 3 else None  # attributes, if listed
        self.params: dict[str, str] = {}  # local name -> "<index>[.path]"
        self.found: list[str] = []

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        outer = dict(self.params)
        args = [a.arg for a in node.args.args]
        if args and args[0] in ("self", "cls"):
            args = args[1:]
        self.params.update({a: str(i) for i, a in enumerate(args)})
        self.generic_visit(node)
        self.params = outer

    def _module_of(self, node: ast.AST) -> str | None:
        chain = _chain(node)
        if not chain or chain[0] not in self.params:
            return None
        return ".".join([self.params[chain[0]]] + chain[1:])

    def visit_Assign(self, node: ast.Assign) -> None:
        path = self._module_of(node.value)
        for target in node.targets:
            if path and isinstance(target, ast.Name):
                self.params[target.id] = path
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        path = self._module_of(node.iter)
        if path and isinstance(node.target, ast.Name):
            self.params[node.target.id] = path + ".*"
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("forward", "__call__"):
            func = func.value
        if self._module_of(func) in self.whole:
            self.found.append(
                say(
                    "calls `{call}` whole. {lesson}",
                    call=ast.unparse(node.func),
                    lesson=self.lesson,
                )
            )
        if _name(node.func) == "getattr" and len(node.args) > 1:
            name = node.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                self._attribute(name.value, ast.unparse(node))
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.names:
            self._dotted(self.names[node.id])

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain = _chain(node)
        if chain and chain[0] in self.names and "*" not in chain:
            self._dotted(".".join([self.names[chain[0]]] + chain[1:]))
        self._attribute(node.attr, ast.unparse(node))
        self.generic_visit(node)

    def _attribute(self, attr: str, text: str) -> None:
        if attr in self.banned:
            self.found.append(say(USES, text=text, lesson=self.lesson))
        elif self.allowed is not None and attr not in self.allowed:
            self.found.append(
                say(
                    "uses `{text}`, which this exercise does not need. {lesson}",
                    text=text,
                    lesson=self.lesson,
                )
            )

    def _dotted(self, dotted: str) -> None:
        allowed = any(dotted == m or dotted.startswith(m + ".") for m in MODULES)
        if not allowed or dotted.startswith(LOW_LEVEL):
            self.found.append(
                say(
                    "uses `{dotted}`, which answers in this course do not need.",
                    dotted=dotted,
                )
            )
        elif dotted.split(".")[-1] in self.banned:
            self.found.append(say(USES, text=dotted, lesson=self.lesson))


class _StateReader(ast.NodeVisitor):
    """What any student cell does that reaches past its own code: changing modules,
    dynamic code, private names, builtins outside :data:`BUILTINS`."""

    def __init__(self, names: dict[str, str], own: set[str]):
        self.names, self.own = names, own
        self.found: list[str] = []
        self.called: set[int] = set()  # getattr names in call position

    def _store(self, target: ast.AST) -> None:
        chain = _chain(target)
        if chain and chain[0] in self.names and len(chain) > 1:
            self.found.append(
                say("changes `{name}`, a module's name", name=ast.unparse(target))
            )

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._store(target)
        chain = _chain(node.value)
        if chain and chain[0] in self.names:  # an alias of a module is a module
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.names[target.id] = ".".join([self.names[chain[0]]] + chain[1:])
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._store(node.target)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._store(target)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if _name(node.func) == "getattr":
            self.called.add(id(node.func))
            name = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                self.found.append(say("looks a name up with getattr()"))
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if name == "getattr" and id(node) not in self.called:
            self.found.append(say("passes getattr around as a value"))
        elif name == "__shell__":
            self.found.append(say("runs a shell command (!)"))
        elif name in ("get_ipython", "__builtins__", "__import__", "__loader__"):
            self.found.append(say("uses `{name}`", name=name))
        elif (
            name not in self.own
            and name not in self.names
            and hasattr(builtins, name)
            and name not in BUILTINS
            and not name.endswith(("Error", "Exception", "Warning"))
        ):
            self.found.append(say("uses `{name}`", name=name))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr, chain = node.attr, _chain(node)
        dunder = attr.startswith("__") and attr.endswith("__")
        root = self.names.get(chain[0], "") if chain else ""
        private = attr.startswith("_") and not dunder
        if (dunder and attr not in DUNDERS) or attr in HOOKS:
            self.found.append(say("uses `{name}`", name=ast.unparse(node)))
        elif private and root.split(".")[0] in ("torch", "numpy", "course"):
            self.found.append(
                say("uses `{name}`, a private name", name=ast.unparse(node))
            )
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._module(alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self._module(node.module or "")
        for alias in node.names:
            if alias.name.startswith("_"):
                self.found.append(
                    say("imports {name}, a private name", name=alias.name)
                )

    def _module(self, name: str) -> None:
        if name.split(".")[0] in DYNAMIC_MODULES:
            self.found.append(say("imports {name}", name=name))


def _name(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def shortcut_verdicts(nb: NotebookNode) -> dict[str, tuple[str, str]]:
    """``{test cell id: (error name, why it earns 0)}``, read from students' cells.

    An exercise whose code uses its lesson's shortcut, or anything outside the
    allow-list, loses its tests; a cell that reaches past its own code (changes a
    module, dynamic code, private names) loses every test after it.
    """
    cells = student_cells(nb)
    trees = [_parse(c.source) for c in cells]
    for cell, tree in zip(cells, trees, strict=True):  # shell escapes: `!cmd`
        if any(ln.lstrip().startswith("!") for ln in cell.source.splitlines()):
            tree.body.insert(0, ast.parse("__shell__()").body[0])
    names = imports([_parse(c.source) for c in nb.cells if c.cell_type == "code"])
    defines = [_defined(t) for t in trees]
    own = set().union(*defines) if defines else set()
    by_exercise = {}
    for k, cell in enumerate(cells):
        exercise = cell.metadata.get("nbgrader", {}).get("grade_id")
        if not exercise:
            continue
        lesson = LESSONS.get(exercise, ((), (), ""))
        for j in _closure(k, trees, defines):
            reader = _Reader(names, own, lesson)
            reader.visit(trees[j])
            if reader.found:
                by_exercise[exercise] = f"`{exercise}` {reader.found[0]}"
                break
    out, position = {}, {id(c): i for i, c in enumerate(nb.cells)}
    after = None  # the first cell that reaches past its own code
    for cell, tree in zip(cells, trees, strict=True):
        reader = _StateReader(dict(names), own)
        reader.visit(tree)
        if reader.found:
            after = (position[id(cell)], reader.found[0])
            break
    for i, cell in enumerate(nb.cells):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if cell.cell_type != "code" or not grade_id.startswith("test_"):
            continue
        if after and i > after[0]:
            out[grade_id] = (
                TAMPERED,
                say(
                    "an earlier cell {after}, which answers in this course "
                    "never need; every test after it earns 0 (your "
                    "instructor can review it).",
                    after=after[1],
                ),
            )
        for exercise, message in by_exercise.items():
            if grade_id.startswith(f"test_{exercise}_"):
                out.setdefault(grade_id, (SHORTCUT, message))
    return out


def _closure(start: int, trees: list[ast.Module], defines: list[set]) -> list[int]:
    """Indices of the cells ``trees[start]`` needs: itself and the cells defining
    the names it uses, transitively."""
    todo, seen = [start], {start}
    while todo:
        used = {n.id for n in ast.walk(trees[todo.pop()]) if isinstance(n, ast.Name)}
        for k, names in enumerate(defines):
            if k not in seen and names & used:
                seen.add(k)
                todo.append(k)
    return sorted(seen)
