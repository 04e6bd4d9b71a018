"""One reading of a cell's source: Python, with IPython's syntax made explicit.

IPython rewrites ``%magic``, ``%%cell_magic``, ``!shell`` and ``name?`` into calls
of ``get_ipython()``; :func:`parse` parses that rewrite, then puts the code of the
magics that run code (``%time``, ``%%capture``, ...) in place of their call, and
drops the magics that change nothing (``%matplotlib``, ``name?``), so every rule
reads a magic's code like any other line and sees every other magic as a use of
``get_ipython``.
"""

from __future__ import annotations

import ast
import re

from nbformat import NotebookNode

from ...cells import is_answer, is_locked, is_test
from .deny import CODE_MAGICS, MAGICS_OK


def role(cell: NotebookNode) -> str:
    """``"answer"``, ``"test"``, ``"given"`` or ``"text"``: what a cell is for."""
    if cell.cell_type != "code":
        return "text"
    if is_answer(cell):
        return "answer"
    if is_test(cell):
        return "test"
    if is_locked(cell):
        return "given"
    return "answer"  # a cell the student added


def parse(source: str) -> ast.Module | None:
    """The cell as Python, magics made explicit; None if it is no valid Python."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        tree = ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError:
        return None  # it fails when run, like any syntax error
    return ast.fix_missing_locations(_Magics().visit(tree))


def _magic(node: ast.AST) -> tuple[str, list[str]] | None:
    """``(magic, its arguments)`` for ``get_ipython().run_*_magic(...)``."""
    func = getattr(node, "func", None)
    if not (
        isinstance(func, ast.Attribute)
        and func.attr in ("run_line_magic", "run_cell_magic")
        and isinstance(func.value, ast.Call)
        and getattr(func.value.func, "id", None) == "get_ipython"
        and node.args
        and all(isinstance(a, ast.Constant) for a in node.args)
    ):
        return None
    return str(node.args[0].value), [str(a.value) for a in node.args[1:]]


class _Magics(ast.NodeTransformer):
    """Magics that change nothing go; a code magic becomes its code."""

    def visit_Expr(self, node: ast.Expr):
        magic = _magic(node.value)
        if magic is None:
            return node
        name, args = magic
        if name in MAGICS_OK:
            return ast.Pass()
        if name not in CODE_MAGICS:
            return node
        options = re.sub(r"^(\s*-\w+(\s+\d\S*)?)*", "", args[0])
        body = []
        for k, code in enumerate([options, *args[1:]]):
            inner = parse(code)  # magics in it made explicit too
            if inner is None:
                continue
            # a line magic's code is on its line, a cell magic's below it
            ast.increment_lineno(inner, node.lineno - (k == 0))
            body += inner.body
        return body or ast.Pass()
