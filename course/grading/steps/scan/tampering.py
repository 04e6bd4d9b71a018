"""Code that reaches past its own cell: changing what the tests use, dynamic code,
interpreter hooks, private names, builtins an answer never needs.

:class:`Tampering` reads one cell and lists ``(line, what)`` for each such
construct, ``what`` a catalog fragment ("changes torch.allclose"). Names come from
:mod:`.binder`, the lists from :mod:`.deny`.
"""

from __future__ import annotations

import ast
import builtins
import re

from ....i18n import say
from . import deny
from .binder import bindings, chain, dynamic_import, root


def _unparse(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001 - only used in a message
        return "?"


def _read_only(node: ast.Call) -> bool:
    mode = node.args[1] if len(node.args) > 1 else None
    mode = next((k.value for k in node.keywords if k.arg == "mode"), mode)
    if mode is None:
        return True
    return isinstance(mode, ast.Constant) and not set(str(mode.value)) & set("wax+")


def _own_locals(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    """The names a function binds in its own scope (its parameters, what its body
    assigns, imports or defines), less those it declares global or nonlocal; the
    scopes nested in it (functions, classes, comprehensions) keep theirs."""
    a = node.args
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
    names = {p.arg for p in params if p is not None}
    outer: set[str] = set()
    todo = list(node.body) if isinstance(node.body, list) else [node.body]
    while todo:
        child = todo.pop()
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(child.name)
            continue
        if isinstance(child, (ast.Lambda, *COMPREHENSIONS)):
            continue
        if isinstance(child, ast.Name) and not isinstance(child.ctx, ast.Load):
            names.add(child.id)
        elif isinstance(child, (ast.Import, ast.ImportFrom)):
            names |= set(bindings(child))
        elif isinstance(child, ast.ExceptHandler) and child.name:
            names.add(child.name)
        elif isinstance(child, (ast.Global, ast.Nonlocal)):
            outer |= set(child.names)
        todo.extend(ast.iter_child_nodes(child))
    return names - outer


COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _rebinds(name: str) -> str:
    return say("rebinds {name}, which the tests use", name=name)


class Tampering(ast.NodeVisitor):
    """``found``: ``(line, what)`` for each construct of one cell that tampers.

    ``names`` maps every name the notebook's imports bind (aliases included) to
    what it is: changing their attributes is tampering. ``protected`` maps the
    names the given cells import for the tests: binding them to anything else is
    tampering. ``own`` are the names the student's cells define.
    """

    def __init__(self, names: dict[str, str], protected: dict[str, str], own=()):
        self.names, self.protected, self.own = names, protected, set(own)
        self.found: list[tuple[int, str]] = []
        self.called: set[int] = set()  # names in call position, judged there
        self.scopes: list[set[str]] = []  # the locals of each function we are in

    def hit(self, node: ast.AST, what: str) -> None:
        self.found.append((getattr(node, "lineno", 0), what))

    def visit_Call(self, node: ast.Call) -> None:
        name = node.func.id if isinstance(node.func, ast.Name) else None
        self.called.add(id(node.func))
        if name == "open" and not _read_only(node):
            self.hit(node, say("opens a file for writing"))
        elif name in deny.CALLS and name != "open":
            self.hit(node, say("calls {name}()", name=name))
        elif name == "getattr":
            key = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                self.hit(node, say("looks a name up with getattr()"))
        elif name not in ("open", None):
            self.called.discard(id(node.func))  # other builtins: judged as names
        if (module := dynamic_import(node)) is not None:
            self._module(node, module)
        if isinstance(node.func, ast.Attribute) and node.func.attr in (
            "system",
            "getoutput",
        ):
            if root(node.func) == "get_ipython":  # `!cmd`, `x = !cmd`
                self.hit(node, say("runs a shell command (!)"))
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        name, load = node.id, isinstance(node.ctx, ast.Load)
        if name in deny.NAMES and load:
            self.hit(node, say("uses {name}", name=name))
        elif name == "getattr" and id(node) not in self.called:
            self.hit(node, say("passes getattr around as a value"))
        elif load and id(node) not in self.called and self._denied_builtin(name):
            self.hit(node, say("uses `{name}`", name=name))
        if not load and name in self.protected:
            self.hit(node, _rebinds(name))

    def _denied_builtin(self, name: str) -> bool:
        return (
            name not in self.own
            and not any(name in scope for scope in self.scopes)  # def f(input): ...
            and name not in self.names
            and hasattr(builtins, name)
            and name not in deny.BUILTINS
            and not name.endswith(("Error", "Exception", "Warning"))
        )

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        dunder = attr.startswith("__") and attr.endswith("__")
        names = chain(node)
        module = self.names.get(names[0], "") if names else ""
        if dunder and attr not in deny.DUNDERS_OK:
            self.hit(node, say("uses the attribute {attr}", attr=attr))
        elif attr in deny.ATTRS:
            self.hit(node, say("uses {name}", name=_unparse(node)))
        elif attr.startswith("_") and module.split(".")[0] in deny.PRIVATE_ROOTS:
            self.hit(node, say("uses `{name}`, a private name", name=_unparse(node)))
        self._store(node)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self._store(node)
        self.generic_visit(node)

    def _store(self, node: ast.Attribute | ast.Subscript) -> None:
        roots = set(self.names) | {"getattr", "type"}  # getattr(torch, "x").y = ...
        stored = isinstance(node.ctx, (ast.Store, ast.Del))
        target = _unparse(node) if stored else ""
        if stored and (root(node) in roots or ".__class__." in target):
            if not any(re.search(p, target) for p in deny.HARMLESS):
                self.hit(node, say("changes {target}", target=target))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._module(node, alias.name)
        self._rebinds_by_import(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        names = {alias.name for alias in node.names}
        if not names <= deny.PLAIN_NAMES.get(node.module or "", set()):
            self._module(node, node.module or "")
        for alias in node.names:
            if alias.name in deny.CALLS or alias.name == "*":
                self.hit(node, say("imports {name}", name=alias.name))
            elif alias.name.startswith("_"):
                self.hit(node, say("imports {name}, a private name", name=alias.name))
        self._rebinds_by_import(node)

    def _rebinds_by_import(self, node: ast.Import | ast.ImportFrom) -> None:
        for bound, target in bindings(node).items():
            if self.protected.get(bound, target) != target:
                self.hit(node, _rebinds(bound))

    def _module(self, node: ast.AST, name: str) -> None:
        if any(name == m or name.startswith(m + ".") for m in deny.MODULES):
            self.hit(node, say("imports {name}", name=name))

    def visit_FunctionDef(self, node) -> None:
        if node.name in self.protected:
            self.hit(node, _rebinds(node.name))
        if node.name in deny.LYING:
            self.hit(node, say("defines {name}", name=node.name))
        if isinstance(node, ast.ClassDef):  # its names do not reach its methods
            self.generic_visit(node)
            return
        for outside in (*node.decorator_list, node.args, node.returns):
            if outside is not None:  # defaults and annotations: the outer scope's
                self.visit(outside)
        self._within(_own_locals(node), node.body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit(node.args)
        self._within(_own_locals(node), [node.body])

    def _comprehension(self, node) -> None:
        first, *rest = node.generators
        self.visit(first.iter)  # evaluated in the enclosing scope
        targets = {
            n.id
            for g in node.generators
            for n in ast.walk(g.target)
            if isinstance(n, ast.Name)
        }
        parts = [first.target, *first.ifs, *rest]
        parts += [getattr(node, k) for k in ("elt", "key", "value") if hasattr(node, k)]
        self._within(targets, parts)

    visit_ListComp = visit_SetComp = visit_GeneratorExp = _comprehension
    visit_DictComp = _comprehension

    def _within(self, names: set[str], nodes: list[ast.AST]) -> None:
        self.scopes.append(names)
        try:
            for child in nodes:
                self.visit(child)
        finally:
            self.scopes.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            if re.search(deny.LYING_BASES, _unparse(base)):
                self.hit(node, say("subclasses {name}", name=_unparse(base)))
        self.visit_FunctionDef(node)

    def visit_Global(self, node: ast.Global) -> None:
        for name in sorted(set(node.names) & set(self.protected)):
            self.hit(node, _rebinds(name))
