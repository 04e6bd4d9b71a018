"""Each exercise's lesson, read from the answer's source.

Answers may use public names of the modules the course needs (:data:`MODULES`)
and their own names. Each exercise's :class:`~course.checks.lessons.Lesson`,
declared beside its checks (``LESSONS`` in each notebook's check module, which
also turns the same shortcuts off in the kernel), adds the names it turns off
(``softmax`` for softmax by hand, fused attention for attention by hand), the
modules an answer may not call whole (``self_attn(hidden)`` in 06) and, for
softmax by hand, the only attributes it may use. An exercise's code is its
answer cell plus every student cell that defines a name it uses, transitively,
so a helper in another cell counts where it is called.
"""

from __future__ import annotations

import ast

from ....checks import (
    attention,
    debugging,
    decoding,
    heads,
    layer,
    modern,
    outputs,
    positions,
    softmax,
    transformer,
)
from ....checks.lessons import Lesson
from ....i18n import N_, say
from . import deny
from .binder import chain

MODULES = {"torch", "math", "numpy", "random", "matplotlib", "collections"}
MODULES |= {"itertools", "functools", "typing", "dataclasses", "copy", "transformers"}
MODULES |= {"course.models", "course.data", "course.viz", "__future__"}
# The plain classes a denied module holds (``types.SimpleNamespace``): one list.
MODULES |= {f"{m}.{name}" for m, names in deny.PLAIN_NAMES.items() for name in names}
LOW_LEVEL = ("torch.ops", "torch.library", "torch.utils.cpp_extension", "torch.jit")
USES = N_("uses `{text}`. {lesson}")  # a name the exercise's lesson turns off

#: The notebooks' check modules that declare lessons (``LESSONS``).
DECLARED_IN = (softmax, heads, outputs, attention, layer, positions, transformer)
DECLARED_IN += (debugging, modern, decoding)
LESSONS: dict[str, Lesson] = {
    exercise: lesson
    for module in DECLARED_IN
    for exercise, lesson in module.LESSONS.items()
}


class LessonReader(ast.NodeVisitor):
    """``found``: ``(line, what)`` for what one exercise's code uses that its
    lesson or the allow-list of modules forbids."""

    def __init__(
        self,
        names: dict[str, str],
        lesson: Lesson,
        classes: frozenset[str] = frozenset(),
    ):
        self.names, self.lesson = names, lesson
        self.classes = classes  # the student's own classes: their attributes are theirs
        self.params: dict[str, str] = {}  # local name -> "<index>[.path]"
        self.instances: set[str] = set()  # names only ever bound to one of them
        self.selves: set[str] = set()  # a method's first parameter, where it is one
        self.methods: set[int] = set()  # id() of functions defined in a class body
        self.found: list[tuple[int, str]] = []

    def hit(self, node: ast.AST, what: str) -> None:
        self.found.append((getattr(node, "lineno", 0), what))

    def visit_Module(self, node: ast.Module) -> None:
        self.instances = own_instances(node, self.classes)
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.methods |= {id(f) for f in node.body if isinstance(f, ast.FunctionDef)}
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        outer, selves = dict(self.params), set(self.selves)
        args = [a.arg for a in node.args.args]
        every = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        self.selves -= every  # a parameter hides an outer method's self
        if args and id(node) in self.methods:
            self.selves.add(args[0])  # self or cls, whatever it is called
        if args and args[0] in ("self", "cls"):
            args = args[1:]
        self.params.update({a: str(i) for i, a in enumerate(args)})
        self.generic_visit(node)
        self.params, self.selves = outer, selves

    def _module_of(self, node: ast.AST) -> str | None:
        names = chain(node)
        if not names or names[0] not in self.params:
            return None
        return ".".join([self.params[names[0]]] + names[1:])

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
        if self._module_of(func) in self.lesson.whole:
            call = ast.unparse(node.func)
            message = say(
                "calls `{call}` whole. {lesson}", call=call, lesson=self.lesson.message
            )
            self.hit(node, message)
        if getattr(node.func, "id", None) == "getattr" and len(node.args) > 1:
            name = node.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                self._attribute(node, name.value, ast.unparse(node))
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.names:
            self._dotted(node, self.names[node.id])

    def visit_Attribute(self, node: ast.Attribute) -> None:
        names = chain(node)
        if names and names[0] in self.names and "*" not in names:
            self._dotted(node, ".".join([self.names[names[0]]] + names[1:]))
        if not self._own(node.value):
            self._attribute(node, node.attr, ast.unparse(node))
        self.generic_visit(node)

    def _own(self, value: ast.AST) -> bool:
        """Whether ``value`` is the student's own object: a method's ``self`` or
        ``cls``, one of their classes, an instance made by calling it
        (``_Answer().softmax``) or a name only ever bound to one (``rope =
        Rotary(d); rope.rotate_half(x)``: :func:`own_instances`)."""
        if isinstance(value, ast.Name) and value.id in self.instances | self.selves:
            return True
        if isinstance(value, ast.Call):
            value = value.func
        return isinstance(value, ast.Name) and value.id in self.classes

    def _attribute(self, node: ast.AST, attr: str, text: str) -> None:
        lesson = self.lesson
        if attr in lesson.banned:
            self.hit(node, say(USES, text=text, lesson=lesson.message))
        elif lesson.allowed is not None and attr not in lesson.allowed:
            message = say(
                "uses `{text}`, which this exercise does not need. {lesson}",
                text=text,
                lesson=lesson.message,
            )
            self.hit(node, message)

    def _dotted(self, node: ast.AST, dotted: str) -> None:
        allowed = any(dotted == m or dotted.startswith(m + ".") for m in MODULES)
        if not allowed or dotted.startswith(LOW_LEVEL):
            message = say(
                "uses `{dotted}`, which answers in this course do not need.",
                dotted=dotted,
            )
            self.hit(node, message)
        elif dotted.split(".")[-1] in self.lesson.banned:
            self.hit(node, say(USES, text=dotted, lesson=self.lesson.message))


def own_instances(tree: ast.AST, classes: frozenset[str]) -> set[str]:
    """The names that every binding in ``tree`` binds to an instance of one of the
    student's ``classes`` (``name = C(...)``). A name bound any other way as well
    (a tuple target, a parameter, a loop, ``:=``, ``with``, ``except``, an import,
    ``global``) is not theirs: it may hold anything."""
    made, trusted = set(), set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id in classes
        ):
            made.add(id(node.targets[0]))
            trusted.add(node.targets[0].id)
    other = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            if id(node) not in made:
                other.add(node.id)
        elif isinstance(node, ast.arg):
            other.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            other.add(node.name)
        elif isinstance(node, ast.alias):
            other.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            other.update(node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
            other.add(node.name or "")
        elif isinstance(node, ast.MatchMapping):
            other.add(node.rest or "")
    return trusted - other


def classes(trees: list[ast.Module]) -> frozenset[str]:
    """The names of the classes these cells define, at any depth."""
    return frozenset(
        n.name for t in trees for n in ast.walk(t) if isinstance(n, ast.ClassDef)
    )


def defined(tree: ast.Module) -> set[str]:
    """The names a cell defines at its top level."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        for target in getattr(node, "targets", [getattr(node, "target", None)]):
            names |= {
                n.id for n in ast.walk(target or ast.Pass()) if isinstance(n, ast.Name)
            }
    return names


def closure(start: int, trees: list[ast.Module], defines: list[set]) -> list[int]:
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


def needs(names: list[str], closures: list[list[int]]) -> dict[str, tuple[str, ...]]:
    """``{name: the other named cells its code uses}`` for each named cell, from
    each cell's :func:`closure`; ``names[j]`` empty for a cell that is no exercise."""
    return {
        name: tuple(names[j] for j in closures[k] if names[j] and j != k)
        for k, name in enumerate(names)
        if name
    }
