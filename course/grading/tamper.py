"""Find code that reaches into the grading machinery, and zero the tests after it.

The tests run in the student's own kernel, so an answer cell can replace
``torch.allclose``, a function of ``course.checks``, a builtin, or IPython's error
display, and every later test would pass. None of that is needed to answer an
exercise of this course, so :class:`FlagTampering` reads every cell a student can
write (out of the kernel, as source: the student's code cannot change this) and,
after the first cell that does any of it, gives every test cell an error output
``TamperingDetected`` naming the cell, the line and what it does. Those tests earn
0; ``python -m course grade`` flags the submission for the instructor to review.

What counts (:func:`scan`): assigning to or deleting an attribute or item of an
imported name (``torch.allclose = ...``, ``checks.close = ...``); rebinding a name
that the given cells import (``check = ...``); dynamic code and introspection
(``exec``, ``eval``, ``compile``, ``__import__``, ``setattr``, ``globals``,
``vars``, ``get_ipython``, dunder attributes, frame attributes); modules for it
(``builtins``, ``importlib``, ``ctypes``, ``gc``, ``subprocess``, ...); writing
files; hooks in ``sys``; and IPython magics other than a few harmless ones.
"""

from __future__ import annotations

import ast
import re

from nbgrader.preprocessors import NbGraderPreprocessor

from ..i18n import say
from .enames import TAMPERED
from .execute import error_output, is_test_cell

CALLS = {"exec", "eval", "compile", "__import__", "setattr", "delattr", "globals"}
CALLS |= {"vars", "get_ipython", "breakpoint", "open"}
MODULES = {"builtins", "importlib", "ctypes", "gc", "subprocess", "shutil", "pickle"}
MODULES |= {"marshal", "types", "resource", "runpy", "code", "codeop", "inspect"}
MODULES |= {"IPython.core", "ipykernel", "traitlets", "nbgrader", "threading"}
ATTRS = {"settrace", "setprofile", "excepthook", "displayhook", "addaudithook"}
ATTRS |= {"_getframe", "modules", "meta_path", "path_hooks", "system", "popen"}
ATTRS |= {"f_globals", "f_locals", "f_back", "f_builtins", "tb_frame", "gi_frame"}
ATTRS |= {"write_text", "write_bytes", "remove", "unlink", "rmdir", "chmod"}
DUNDERS_OK = {"__init__", "__name__", "__doc__", "__version__", "__len__"}
DUNDERS_OK |= {"__call__", "__repr__", "__str__", "__qualname__"}
MAGICS_OK = {"matplotlib", "precision", "who", "whos", "pinfo", "pinfo2"}
CODE_MAGICS = {"time", "timeit", "capture"}
# An object that lies to the comparisons: answers never need to define these.
LYING = {"__torch_function__", "__torch_dispatch__", "__array_function__"}
LYING |= {"__array_ufunc__", "__instancecheck__", "__subclasscheck__", "__eq__"}
LYING |= {"__ne__", "__bool__", "__float__", "__int__", "__index__", "__getattr__"}
LYING |= {"__getattribute__"}
HARMLESS = [r"\brcParams\b", r"^torch\.backends\."]  # plot style, cuDNN flags


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _dotted(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001 - only used in a message
        return "?"


def _magic_code(node: ast.Call) -> tuple[str, list[str]] | None:
    """``(magic, code args)`` for ``get_ipython().run_*_magic(...)``, else None."""
    func = node.func
    if not (
        isinstance(func, ast.Attribute)
        and func.attr in ("run_line_magic", "run_cell_magic")
        and isinstance(func.value, ast.Call)
        and _root(func.value) == "get_ipython"
        and node.args
        and all(isinstance(a, ast.Constant) for a in node.args)
    ):
        return None
    name = node.args[0].value
    if name in MAGICS_OK:
        return name, []
    if name in CODE_MAGICS:
        line = re.sub(r"^(\s*-\w+(\s+\d\S*)?)*", "", str(node.args[1].value))
        return name, [line] + [str(a.value) for a in node.args[2:]]
    return None


class _Scanner(ast.NodeVisitor):
    def __init__(self, imported: set[str], protected: dict[str, str]):
        self.imported, self.protected = imported, protected
        self.found: list[tuple[int, str]] = []

    def hit(self, node: ast.AST, what: str) -> None:
        self.found.append((getattr(node, "lineno", 0), what))

    def visit_Call(self, node: ast.Call) -> None:
        magic = _magic_code(node)
        if magic is not None:
            for code in magic[1]:
                for _line, what in scan(code, self.imported, self.protected):
                    self.hit(node, what)
            return
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name == "open" and not _read_only(node):
            self.hit(node, say("opens a file for writing"))
        elif name in CALLS - {"open"}:
            self.hit(node, say("calls {name}()", name=name))
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in ("get_ipython", "__builtins__", "__import__") and isinstance(
            node.ctx, ast.Load
        ):
            self.hit(node, say("uses {name}", name=node.id))
        if isinstance(node.ctx, (ast.Store, ast.Del)) and node.id in self.protected:
            self.hit(
                node,
                say("rebinds {name}, which the tests use", name=node.id),
            )

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dunder = node.attr.startswith("__") and node.attr.endswith("__")
        if dunder and node.attr not in DUNDERS_OK:
            self.hit(
                node,
                say("uses the attribute {attr}", attr=node.attr),
            )
        elif node.attr in ATTRS:
            self.hit(node, say("uses {name}", name=_dotted(node)))
        self._store(node)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self._store(node)
        self.generic_visit(node)

    def _store(self, node) -> None:
        roots = self.imported | {"getattr", "type"}  # getattr(torch, "x").y = ...
        if isinstance(node.ctx, (ast.Store, ast.Del)) and _root(node) in roots:
            target = _dotted(node)
            if not any(re.search(p, target) for p in HARMLESS):
                self.hit(node, say("changes {target}", target=target))

    def visit_Import(self, node) -> None:
        for alias in node.names:
            self._module(node, alias.name)
        self._rebinds(node)

    def visit_ImportFrom(self, node) -> None:
        self._module(node, node.module or "")
        for alias in node.names:
            if alias.name in CALLS | {"*"}:
                self.hit(node, say("imports {name}", name=alias.name))
        self._rebinds(node)

    def _rebinds(self, node) -> None:
        for bound, target in _bindings(node).items():
            if self.protected.get(bound, target) != target:
                self.hit(
                    node,
                    say("rebinds {name}, which the tests use", name=bound),
                )

    def _module(self, node, name: str) -> None:
        if any(name == m or name.startswith(m + ".") for m in MODULES):
            self.hit(node, say("imports {name}", name=name))

    def visit_FunctionDef(self, node) -> None:
        if node.name in self.protected:
            self.hit(
                node,
                say("rebinds {name}, which the tests use", name=node.name),
            )
        if node.name in LYING:
            self.hit(node, say("defines {name}", name=node.name))
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node) -> None:
        for base in node.bases:
            if re.search(r"\b(Tensor|ndarray|Parameter)$", _dotted(base)):
                self.hit(node, say("subclasses {name}", name=_dotted(base)))
        self.visit_FunctionDef(node)

    def visit_Global(self, node) -> None:
        for name in set(node.names) & self.protected:
            self.hit(
                node,
                say("rebinds {name}, which the tests use", name=name),
            )


def _read_only(node: ast.Call) -> bool:
    mode = node.args[1] if len(node.args) > 1 else None
    mode = next((k.value for k in node.keywords if k.arg == "mode"), mode)
    if mode is None:
        return True
    return isinstance(mode, ast.Constant) and not set(str(mode.value)) & set("wax+")


def _parse(source: str) -> ast.AST | None:
    """The cell as Python (IPython magics turned into calls); None if it cannot be."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError:
        return None  # it fails when run, like any syntax error


def _bindings(node: ast.Import | ast.ImportFrom) -> dict[str, str]:
    """``{bound name: what it is}`` of one import statement."""
    if isinstance(node, ast.Import):
        return {
            a.asname or a.name.split(".")[0]: a.name
            if a.asname
            else a.name.split(".")[0]
            for a in node.names
        }
    return {a.asname or a.name: f"{node.module}.{a.name}" for a in node.names}


def _imports(trees: list[ast.AST]) -> dict[str, str]:
    """``{name: module or object}`` for every name an ``import`` in ``trees`` binds."""
    names = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update(_bindings(node))
    return names


def imported_names(sources: list[str]) -> dict[str, str]:
    """``{name: module or object}`` for every name an ``import`` in these cells binds."""
    return _imports([t for t in map(_parse, sources) if t is not None])


def _aliases(trees: list[ast.AST], names: set[str]) -> set[str]:
    """``names`` plus every name assigned one of them (``t = torch``, ``f = t.nn``)."""
    names = set(names)
    for _ in range(3):  # chains of aliases, a few deep
        for tree in trees:
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Assign)
                    and isinstance(node.value, (ast.Name, ast.Attribute))
                    and _root(node.value) in names
                ):
                    names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def scan(
    source: str, imported=(), protected: dict[str, str] | None = None
) -> list[tuple[int, str]]:
    """``(line, what)`` for each construct of ``source`` that could tamper.

    ``imported`` are names bound by imports anywhere in the notebook (changing
    their attributes is tampering); ``protected`` maps the names the given cells
    import for the tests to what they import (binding them to anything else is
    tampering; importing the same thing again is fine).
    """
    tree = _parse(source)
    return [] if tree is None else _scan_tree(tree, set(imported), protected or {})


def _scan_tree(tree: ast.AST, imported: set[str], protected: dict) -> list:
    imported = _aliases([tree], imported | set(_imports([tree])))
    scanner = _Scanner(imported, dict(protected))
    scanner.visit(tree)
    return sorted(set(scanner.found))


class FlagTampering(NbGraderPreprocessor):
    """Give every test after the first tampering cell a ``TamperingDetected`` error."""

    def preprocess(self, nb, resources):
        code = [c for c in nb.cells if c.cell_type == "code"]
        trees = [_parse(c.source) for c in code]  # each cell parsed once
        parsed = [t for t in trees if t is not None]
        given = [
            t
            for c, t in zip(code, trees, strict=True)
            if t is not None and _locked(c) and not is_test_cell(c)
        ]
        protected = _imports(given)
        imported = _aliases(parsed, set(_imports(parsed)))
        verdict = None
        for index, (cell, tree) in enumerate(zip(code, trees, strict=True)):
            if is_test_cell(cell):
                if verdict:
                    cell.outputs.append(error_output(TAMPERED, verdict))
                continue
            if verdict or _locked(cell) or tree is None:
                continue
            found = _scan_tree(tree, imported, protected)
            if found:
                line, what = found[0]
                name = cell.metadata.get("nbgrader", {}).get("grade_id", f"#{index}")
                verdict = say(
                    "cell {name}, line {line}, {what}: code that changes "
                    "the grading tools sets every later test to 0 and is "
                    "flagged for your instructor to review",
                    name=name,
                    line=line,
                    what=what,
                )
                self.log.warning("tampering: %s", verdict)
        return nb, resources


def _locked(cell) -> bool:
    return bool(cell.metadata.get("nbgrader", {}).get("locked"))
