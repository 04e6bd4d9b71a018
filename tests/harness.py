"""Grade fixture submissions with a real ``nbgrader autograde`` run.

A fixture module ``tests/fixtures/a<NN>.py`` (for assignment ``<NN>_...``) defines

* ``ALTERNATIVES``: ``{answer_cell_id: code}``, correct answers written another way;
  one submission holds all of them and must earn full marks;
* ``FORMS`` (optional): ``{answer_cell_id: [code, ...]}``, more correct answers in
  unusual forms (float64, einsum, hand-written library calls, other reduction
  orders), each checked on its own on many seeds (``tests/test_checks_seeds.py``,
  ``bench/seed_fairness.py``);
* ``MUTANTS``: a list of :class:`Mutant`, each one wrong answer with every test cell
  it must lose (those of later answers that call it too) and a piece of the message
  each must show. Mutants of different cells that lose no test cell in common are
  graded together, round by round, in one submission per round (:func:`rounds`).

Every other test cell of a submission must keep its full points, so a mutant that
drags down an unrelated exercise fails the test too.
"""

from __future__ import annotations

import ast
import importlib
import json
import linecache
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from course import grading
from course.grading import cells
from course.grading.kernel import warm
from course.grading.steps import scan
from course.grading.steps.scan.lessons import closure, needs


@dataclass
class Mutant:
    """One wrong answer: cell id, its code, and ``{test_cell: message piece}`` (a
    tuple of pieces where the verdict says them apart, each on another case)."""

    cell: str
    name: str
    code: str
    fails: dict[str, str | tuple[str, ...]] = field(default_factory=dict)


def has_piece(message: str, piece: str | tuple[str, ...]) -> bool:
    """Whether ``message`` holds ``piece``, or every one of a tuple of pieces."""
    return all(p in message for p in (piece if isinstance(piece, tuple) else (piece,)))


def other_forms(mutant: Mutant) -> list[Mutant]:
    """The same mistake written two other ways: inside a helper, inside a class.

    * helper: the answer's code is renamed ``_<name>_impl``, and the answer
      becomes a function with the same parameters that calls it;
    * class: the answer is a method of an object (for a function), or a subclass
      that adds nothing (for a class).

    Answers that are values, not a function or a class, have no such forms.
    """
    tree = ast.parse(mutant.code)
    node = next((n for n in tree.body if getattr(n, "name", None) == mutant.cell), None)
    if node is None:
        return []
    impl = f"_{mutant.cell}_impl"
    code = re.sub(rf"\b(def|class) {mutant.cell}\b", rf"\1 {impl}", mutant.code)
    if isinstance(node, ast.ClassDef):
        body = f"{code}\n\nclass {mutant.cell}({impl}):\n    pass\n"
        return [replace(mutant, name=f"{mutant.name}, in a base class", code=body)]
    params, call = _signature(node.args)
    helper = f"{code}\n\ndef {mutant.cell}({params}):\n    return {impl}({call})\n"
    method = (
        f"{code}\n\nclass _Answer:\n    def {mutant.cell}(self, {params}):\n"
        f"        return {impl}({call})\n\n\n{mutant.cell} = _Answer().{mutant.cell}\n"
    )
    return [
        replace(mutant, name=f"{mutant.name}, in a helper", code=helper),
        replace(mutant, name=f"{mutant.name}, in a class", code=method),
    ]


def _signature(args: ast.arguments) -> tuple[str, str]:
    """The parameter list of a function (defaults kept) and the call passing them."""
    params = ast.unparse(args)
    positional = [a.arg for a in args.posonlyargs + args.args]
    call = positional + ([f"*{args.vararg.arg}"] if args.vararg else [])
    call += [f"{a.arg}={a.arg}" for a in args.kwonlyargs]
    call += [f"**{args.kwarg.arg}"] if args.kwarg else []
    return params, ", ".join(call)


#: Checks that train a model twice per seed: the notebook tests cover them.
SLOW = ("train_",)


def hidden_calls(
    assignment: str, *, slow: bool = False
) -> list[tuple[str, object, str, dict]]:
    """``(test cell id, check function, student name, kwargs)`` of hidden tests
    (without the :data:`SLOW` ones unless ``slow``)."""
    import nbformat

    from course.grading.steps.judge import check_modules

    path = grading.notebook_path(grading.ROOT, "source", assignment)
    nb = nbformat.reads(path.read_text(), as_version=4)
    modules = check_modules(nb)
    out = []
    for cell in nb.cells:
        grade_id = cells.grade_id(cell)
        if not (cells.is_test(cell) and cells.has_hidden_tests(cell.source)):
            continue
        for stmt in ast.parse(cell.source).body:
            call = getattr(stmt, "value", None)
            if not isinstance(call, ast.Call):
                continue
            fn = getattr(modules[call.func.value.id], call.func.attr)
            kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
            if slow or not fn.__name__.startswith(SLOW):
                out.append((grade_id, fn, call.args[0].id, kwargs))
    return out


def run_cell(source: str, ns: dict, *, name: str = "") -> None:
    """Run ``source`` in ``ns`` as a notebook cell runs: under a ``<name>``
    filename of its own (by default one per source) whose lines a traceback can
    read (ipykernel registers each cell with :mod:`linecache`), so a verdict
    quotes the student's failing line."""
    filename = f"<{name or 'cell-' + str(abs(hash(source)))}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), ns)


def answer_namespace(assignment: str, answers: dict[str, str]) -> dict:
    """The reference answers, with ``answers`` in their place, run in one namespace
    (answers that need the notebook's variables are left out)."""
    import math

    import matplotlib.pyplot as plt
    import torch
    import torch.nn.functional as F
    from torch import nn

    ns = {"torch": torch, "F": F, "nn": nn, "math": math, "plt": plt}
    code = {**reference_answers(grading.ROOT, assignment), **answers}
    for name, source in code.items():
        try:
            run_cell(source, ns, name=name)
        except Exception:  # noqa: BLE001 - cells that need the notebook's variables
            pass
    return ns


def verdict(fn, value, kwargs: dict, seed: int) -> str:
    """A hidden check's message on ``seed`` ("" when it passes)."""
    from course.checks import CheckFailed

    try:
        fn(value, **{**kwargs, "seed": seed})
    except CheckFailed as err:
        return str(err)
    return ""


def correct_forms(assignment: str) -> list[tuple[str, dict[str, str], str | None]]:
    """``(label, answers, cell)``: every correct way of the fixtures to answer, each
    to run with the reference answers around it, and the one answer cell whose
    checks it is for (None: all of them). The reference, the alternatives together,
    each alternative in a helper and in a class, and each of ``FORMS`` on its own."""
    fixtures = fixture_module(assignment)
    forms = [Mutant(cell, cell, code) for cell, code in fixtures.ALTERNATIVES.items()]
    forms = [f for m in forms for f in other_forms(m)]
    forms += [
        Mutant(cell, f"{cell}, form {k}", code)
        for cell, codes in getattr(fixtures, "FORMS", {}).items()
        for k, code in enumerate(codes, 1)
    ]
    return [
        ("reference", {}, None),
        ("alternatives", dict(fixtures.ALTERNATIVES), None),
        *((f.name, {f.cell: f.code}, f.cell) for f in forms),
    ]


def fixture_module(assignment: str):
    return importlib.import_module(f"fixtures.a{assignment[:2]}")


def reference_answers(root: Path, assignment: str) -> dict[str, str]:
    """The solution code of every answer cell, markers removed."""
    nb = json.loads(grading.notebook_path(root, "source", assignment).read_text())
    out = {}
    for cell in nb["cells"]:
        if cells.is_answer(cell) and cell["cell_type"] == "code":
            out[cells.grade_id(cell)] = cells.SOLUTION_LINE.sub(
                "", "".join(cell["source"])
            )
    return out


def definitions(root: Path, assignment: str, answers: dict[str, str]) -> dict:
    """The namespace a notebook's definitions build: its imports, the code it gives
    (cells that only import and define) and its answer cells, ``answers`` replacing
    the reference's. Demos and test cells are left out."""
    nb = json.loads(grading.notebook_path(root, "source", assignment).read_text())
    code = {**reference_answers(root, assignment), **answers}
    ns: dict = {}
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        source = code.get(grade_id, "".join(cell["source"]))
        defines = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)
        if grade_id in code or all(
            isinstance(s, defines) for s in ast.parse(source).body
        ):
            exec(compile(source, grade_id or "<given>", "exec"), ns)
    return ns


def printed(root: Path, assignment: str, student: str) -> str:
    """Everything a student's autograded notebook printed (stream outputs)."""
    path = grading.notebook_path(root, "autograded", assignment, student=student)
    nb = json.loads(path.read_text())
    return "".join(
        "".join(o.get("text", ""))
        for c in nb["cells"]
        for o in c.get("outputs", [])
        if o.get("output_type") == "stream"
    )


def fill(release_nb: dict, answers: dict[str, str]) -> dict:
    """A copy of the release notebook with the given answer cells replaced."""
    nb = json.loads(json.dumps(release_nb))
    for cell in nb["cells"]:
        if cells.grade_id(cell) in answers:
            cell["source"] = answers[cells.grade_id(cell)]
    return nb


def rounds(
    mutants: list[Mutant], uses: dict[str, set[str]] | None = None
) -> list[list[Mutant]]:
    """The mutants packed into rounds, first fit in their order. In a round no two
    share an answer cell or a test cell they must lose, and none is of a cell the
    other's code uses (``uses``: :func:`answer_uses`): a wrong earlier answer could
    mask what a later one must lose (a NaN loss is the same in every run). So each
    test cell that fails in a round's submission fails for one mutant, the one
    whose message it must show.
    """
    uses = uses or {}

    def related(a: Mutant, b: Mutant) -> bool:
        """One's cell is used by the other's (reference or wrong) code, or both by
        a third answer, whose verdict could not tell which one is its cause."""
        return (
            a.cell in uses.get(b.cell, ()) | _names(b.code)
            or b.cell in uses.get(a.cell, ()) | _names(a.code)
            or any({a.cell, b.cell} <= used for used in uses.values())
        )

    def apart(a: Mutant, b: Mutant) -> bool:
        return a.cell != b.cell and not a.fails.keys() & b.fails and not related(a, b)

    packed: list[list[Mutant]] = []
    for mutant in mutants:
        round_ = next((r for r in packed if all(apart(m, mutant) for m in r)), None)
        if round_ is None:
            packed.append([mutant])
        else:
            round_.append(mutant)
    return packed


def _names(code: str) -> set[str]:
    """The names a piece of code loads."""
    tree = scan.parse(code) or ast.Module(body=[], type_ignores=[])
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def answer_uses(nb: dict) -> dict[str, set[str]]:
    """``{answer cell: the other answer cells its code uses}``, through every code
    cell (09's training uses the given TinyTransformer, which uses the answers'
    attention): by the names each cell defines at its top level."""
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    empty = ast.Module(body=[], type_ignores=[])
    trees = [scan.parse("".join(c["source"])) or empty for c in code]
    defines = [scan.defined(t) for t in trees]
    names = [cells.grade_id(c) if cells.is_answer(c) else "" for c in code]
    closures = [closure(k, trees, defines) for k in range(len(code))]
    return {name: set(used) for name, used in needs(names, closures).items()}


def submissions(root: Path, assignment: str) -> dict[str, tuple[dict, dict[str, str]]]:
    """``{student: (notebook, {failing test cell: message piece})}``."""
    fixtures = fixture_module(assignment)
    release_nb = json.loads(
        grading.notebook_path(root, "release", assignment).read_text()
    )
    reference = reference_answers(root, assignment)
    subs = _correct_students(release_nb, reference, fixtures)
    uses = answer_uses(fill(release_nb, reference))
    for k, mutants in enumerate(rounds(fixtures.MUTANTS, uses)):
        answers = {**reference, **{m.cell: m.code for m in mutants}}
        expected = {cell: piece for m in mutants for cell, piece in m.fails.items()}
        subs[f"mutants{k}"] = (fill(release_nb, answers), expected)
    return subs


def _correct_students(release_nb: dict, reference: dict, fixtures) -> dict:
    """The reference answers, and the correct alternatives, as two students."""
    alternatives = {**reference, **fixtures.ALTERNATIVES}
    return {
        "reference": (fill(release_nb, reference), {}),
        "alternatives": (fill(release_nb, alternatives), {}),
    }


def mutant_students(
    root: Path, assignment: str
) -> dict[str, tuple[dict, dict[str, str]]]:
    """As :func:`submissions`, but one student per mutant, named for it
    (``m-<cell>-<name>``): two snapshots compare a mutant with itself even when
    mutants were added or removed between them (rounds would repack them)."""
    fixtures = fixture_module(assignment)
    release_nb = json.loads(
        grading.notebook_path(root, "release", assignment).read_text()
    )
    reference = reference_answers(root, assignment)
    subs = _correct_students(release_nb, reference, fixtures)
    for mutant in fixtures.MUTANTS:
        name = re.sub(r"[^a-z0-9]+", "-", f"m-{mutant.cell}-{mutant.name}".lower())
        name = name.strip("-")
        while name in subs:
            name += "-again"
        answers = {**reference, mutant.cell: mutant.code}
        subs[name] = (fill(release_nb, answers), dict(mutant.fails))
    return subs


def autograde(
    root: Path, assignment: str, subs: dict, *, warm_env: dict | None = None
) -> tuple[dict, dict]:
    """Submit, autograde, and return ``(cell_scores, {student: cell_messages})``.

    With ``warm_env`` (a zygote's, the ``warm_env`` fixture) nbgrader and its
    kernels are forked warm, as ``course grade`` runs them; else nbgrader starts
    cold, as an instructor's ``nbgrader autograde`` does.
    """
    for student, (nb, _) in subs.items():
        path = grading.notebook_path(root, "submitted", assignment, student=student)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(nb))
    if warm_env is None:
        grading.nbgrader("autograde", assignment, "--force", root=root)
    else:
        argv = ["autograde", assignment, "--force", f"--CourseDirectory.root={root}"]
        argv.append(f"--Execute.kernel_name={warm.KERNEL}")
        env = {**warm_env, "PYTHONWARNINGS": "ignore"}
        ran = warm.nbgrader(argv, cwd=str(root), env=env, timeout=3600)
        assert ran is not None and ran[1] == 0 and ran[3], ran and ran[0][-3000:]
    scores = grading.cell_scores(root, assignment)
    messages = {
        s: grading.cell_messages(
            grading.notebook_path(root, "autograded", assignment, student=s)
        )
        for s in subs
    }
    return scores, messages


def drawn_seeds(root: Path, assignment: str, student: str) -> dict[str, str]:
    """``{test cell: "seed=N, ..."}``: the seeds the grader drew for the student's
    hidden tests (kept in the autograded notebook), to rerun a verdict by hand."""
    nb = json.loads(
        grading.notebook_path(
            root, "autograded", assignment, student=student
        ).read_text()
    )
    return {
        cells.grade_id(cell): ", ".join(seeds)
        for cell in nb["cells"]
        if (seeds := cells.SEED.findall("".join(cell["source"])))
    }


def graded_cells(scores: dict) -> list[str]:
    """Ids of the autograded test cells (those with points that are not tasks)."""
    return [cell for cell in scores if cells.is_test_id(cell)]
