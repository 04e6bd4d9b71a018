"""Imports flow one way: no import cycle in ``course/``, and what a student's
kernel loads (``course.checks``) never imports the grader (``course.grading``).

Read from the source (every ``import``, at module level or inside a function),
so a cycle hidden in a function body counts too.
"""

import ast
from pathlib import Path

import pytest

import course

ROOT = Path(course.__file__).parent
SOURCE = ROOT.parent / "source"


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    path = ROOT.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _imports(path: Path) -> set[str]:
    """The ``course`` modules ``path`` imports."""
    name = _module(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:
                child = f"{base}.{alias.name}"
                found.add(child if _is_module(child) else base)
    return {m for m in found if m.split(".")[0] == "course" and _is_module(m)}


GRAPH = {_module(p): _imports(p) - {_module(p)} for p in sorted(ROOT.rglob("*.py"))}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_graph_is_read():
    assert "course.checks.oracles" in GRAPH["course.checks.layer"]
    assert "course.checks" in GRAPH["course.checks.softmax"]


def test_no_import_cycle_in_course():
    assert _cycles(GRAPH) == []


def test_cycles_are_found():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        ["a", "b", "c"]
    ]


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if ".checks" in m))
def test_checks_never_import_the_grader(module):
    assert not {m for m in GRAPH[module] if m.startswith("course.grading")}


def _notebook_modules() -> set[str]:
    """The ``course.checks`` modules the notebooks' test cells import."""
    names = set()
    for path in SOURCE.glob("*/*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "course.checks":
                names |= {f"course.checks.{a.name}" for a in node.names}
    return names & set(GRAPH)


def test_a_notebook_s_checks_import_no_other_notebook_s():
    """Sentences and helpers two notebooks share live in a shared module."""
    notebooks = _notebook_modules()
    assert len(notebooks) > 8
    crossing = {m: GRAPH[m] & notebooks for m in notebooks if GRAPH[m] & notebooks}
    assert crossing == {}
