"""One reading of a submission: the ordered verdicts every grading step uses.

:func:`read` parses each code cell once, binds the notebook's imports once, and
lists, in notebook order, each student cell that reaches past its own code
(:class:`.tampering.Tampering`) and each exercise whose code breaks its lesson
(:class:`.lessons.LessonReader`). The judge turns that list into test verdicts
(:meth:`Reading.verdicts`); ``FlagTampering`` reads the same list, cached in the
notebook's resources, so tampering is decided once.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from nbformat import NotebookNode

from ....checks.lessons import NONE
from ....i18n import say
from ... import cells
from ...cells import grade_id, is_test_id
from ...enames import SHORTCUT, TAMPERED
from .binder import bind
from .lessons import LESSONS, LessonReader, classes, closure, defined, needs
from .source import parse, role
from .tampering import Tampering

CACHE = "course.grading.steps.scan"  # the key of a reading in nbconvert's resources


@dataclass(frozen=True)
class Finding:
    """One verdict of the scan: a cell, a line and what the code there does."""

    ename: str  # TAMPERED: past its own code; SHORTCUT: past its lesson
    cell: int  # index in the notebook's cells
    name: str  # the cell's grade id, or "#<index among code cells>"
    line: int
    what: str  # a catalog fragment: "changes torch.allclose"
    exercise: str = ""  # whose lesson it breaks, for SHORTCUT

    @property
    def message(self) -> str:
        """The sentence every test it costs shows."""
        if self.ename == SHORTCUT:
            return f"`{self.exercise}` {self.what}"
        return say(
            "cell {name}, line {line}, {what}, which answers in this course never "
            "need: every later test earns 0 and is flagged for your instructor to "
            "review",
            name=self.name,
            line=self.line,
            what=self.what,
        )


@dataclass(frozen=True)
class Reading:
    """The scan's verdicts on one notebook, in notebook order."""

    findings: tuple[Finding, ...]
    #: ``{exercise: the other exercises whose answer cells its code uses}``, in
    #: notebook order (``project_head`` calls ``head_params``)
    needs: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def tampering(self) -> Finding | None:
        """The first cell that reaches past its own code, if any."""
        return next((f for f in self.findings if f.ename == TAMPERED), None)

    def verdicts(self, nb: NotebookNode) -> dict[str, tuple[str, str]]:
        """``{test cell id: (error name, why it earns 0)}``: every test after the
        first tampering cell, and every other test of an exercise that breaks its
        lesson."""
        first, out = self.tampering, {}
        shortcuts = [f for f in self.findings if f.ename == SHORTCUT]
        for index, cell in enumerate(nb.cells):
            name = grade_id(cell)
            if role(cell) != "test" or not is_test_id(name):
                continue
            if first and index > first.cell:
                out[name] = (TAMPERED, first.message)
                continue
            for finding in shortcuts:
                if cells.exercise(name, [finding.exercise]) == finding.exercise:
                    out[name] = (SHORTCUT, finding.message)
                    break
        return out


def read(nb: NotebookNode, resources: dict | None = None) -> Reading:
    """The notebook's :class:`Reading`, once per notebook and its sources."""
    key = tuple((role(c), c.source) for c in nb.cells)
    cached = (resources or {}).get(CACHE)
    if cached is not None and cached[0] == key:
        return cached[1]
    reading = _read(nb)
    if resources is not None:
        resources[CACHE] = (key, reading)
    return reading


def _read(nb: NotebookNode) -> Reading:
    code = [(i, c) for i, c in enumerate(nb.cells) if role(c) != "text"]
    trees = {i: parse(c.source) for i, c in code}
    parsed = [t for t in trees.values() if t is not None]
    given = [trees[i] for i, c in code if role(c) == "given" and trees[i]]
    answers = _Answers(
        [(k, i, c) for k, (i, c) in enumerate(code) if role(c) == "answer"]
    )
    answers.read(trees, imports=bind(parsed))
    names, protected = bind(parsed, aliases=True), bind(given)
    own = set().union(*answers.defines)
    findings = []
    for k, (position, index, cell) in enumerate(answers.cells):
        scanner = Tampering(names, protected, own)
        scanner.visit(answers.trees[k])
        if scanner.found:
            line, what = min(scanner.found, key=lambda f: f[0])
            name = grade_id(cell) or f"#{position}"
            findings.append(Finding(TAMPERED, index, name, line, what))
        if grade_id(cell):
            findings += answers.lesson(k, grade_id(cell))
    findings.sort(key=lambda f: (f.cell, f.line))
    return Reading(tuple(findings), answers.needs())


@dataclass
class _Answers:
    """The student's cells: ``(position among code cells, index, cell)`` each,
    parsed, with the names each defines."""

    cells: list[tuple[int, int, NotebookNode]]
    trees: list[ast.Module] = field(default_factory=list)
    defines: list[set[str]] = field(default_factory=list)
    closures: list[list[int]] = field(default_factory=list)  # lessons.closure's
    imports: dict[str, str] = field(default_factory=dict)

    def read(self, trees: dict, *, imports: dict[str, str]) -> None:
        empty = ast.Module(body=[], type_ignores=[])  # a syntax error fails when run
        self.trees = [trees[i] or empty for _, i, _ in self.cells]
        self.defines = [defined(t) for t in self.trees]
        self.closures = [
            closure(k, self.trees, self.defines) for k in range(len(self.trees))
        ]
        self.imports = imports

    def needs(self) -> dict[str, tuple[str, ...]]:
        """Each exercise's answer cell: the other exercises its code uses."""
        return needs([grade_id(cell) for _, _, cell in self.cells], self.closures)

    def lesson(self, k: int, exercise: str) -> list[Finding]:
        """The first thing exercise ``k``'s code uses that its lesson forbids."""
        code = self.closures[k]
        own = classes([self.trees[j] for j in code])
        for j in code:
            reader = LessonReader(self.imports, LESSONS.get(exercise, NONE), own)
            reader.visit(self.trees[j])
            if reader.found:
                line, what = reader.found[0]
                index = self.cells[j][1]
                return [Finding(SHORTCUT, index, exercise, line, what, exercise)]
        return []
