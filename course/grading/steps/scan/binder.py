"""Which names a cell's imports bind, and to what.

One binder for every rule: ``import a.b`` binds ``a`` to ``a``, ``import a.b as c``
binds ``c`` to ``a.b``, ``from a import b as c`` binds ``c`` to ``a.b``, and
``m = __import__("a")`` or ``m = importlib.import_module("a")`` binds ``m`` to
``a``. With aliases, a name assigned a bound name or an attribute of one
(``t = torch``, ``f = t.nn``) is bound too, to ``torch`` and ``torch.nn``.
"""

from __future__ import annotations

import ast


def root(node: ast.AST) -> str | None:
    """The name ``a.b[0].c()`` starts from (``a``), through calls; None if none."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def chain(node: ast.AST) -> list[str] | None:
    """``a.b[0].c`` as ``["a", "b", "*", "c"]``; None if not rooted at a name."""
    parts = []
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        parts.append(node.attr if isinstance(node, ast.Attribute) else "*")
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id] + parts[::-1]


def dynamic_import(node: ast.AST) -> str | None:
    """``"a"`` for ``__import__("a")`` or ``importlib.import_module("a")``."""
    if not (isinstance(node, ast.Call) and node.args):
        return None
    func, name = node.func, node.args[0]
    called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    if called not in ("__import__", "import_module"):
        return None
    if isinstance(name, ast.Constant) and isinstance(name.value, str):
        return name.value
    return None


def bindings(node: ast.AST) -> dict[str, str]:
    """``{bound name: what it is}`` of one import statement (or assignment of a
    dynamic import)."""
    if isinstance(node, ast.Import):
        return {
            a.asname or a.name.split(".")[0]: a.name
            if a.asname
            else a.name.split(".")[0]
            for a in node.names
        }
    if isinstance(node, ast.ImportFrom):
        module = "." * node.level + (node.module or "")
        return {a.asname or a.name: f"{module}.{a.name}" for a in node.names}
    if isinstance(node, ast.Assign) and (module := dynamic_import(node.value)):
        return {t.id: module for t in node.targets if isinstance(t, ast.Name)}
    return {}


def bind(
    trees: list[ast.AST], aliases: bool = False, start: dict[str, str] | None = None
) -> dict[str, str]:
    """``{name: module or object}`` for every name the imports in ``trees`` bind,
    after those of ``start``; with ``aliases``, names assigned one of them too, a
    few assignments deep."""
    names = dict(start or {})
    for tree in trees:
        for node in ast.walk(tree):
            names.update(bindings(node))
    for _ in range(3 if aliases else 0):  # chains of aliases, a few deep
        for tree in trees:
            for node in ast.walk(tree):
                names.update(_alias(node, names))
    return names


def _alias(node: ast.AST, names: dict[str, str]) -> dict[str, str]:
    if not (
        isinstance(node, ast.Assign)
        and isinstance(node.value, (ast.Name, ast.Attribute))
        and root(node.value) in names
    ):
        return {}
    name = root(node.value)
    dotted = names[name] + ast.unparse(node.value)[len(name) :]
    return {t.id: dotted for t in node.targets if isinstance(t, ast.Name)}
