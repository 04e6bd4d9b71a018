"""Verdicts decided in the grader's process, from the evidence the kernel produced.

Under autograde the student's kernel runs every check in record mode
(:mod:`course.checks.evidence`): what the student's code returned goes out as data
in the test cell's outputs. :class:`JudgeEvidence` then, in nbgrader's own process,

* reads each test cell's source (locked: nbgrader restored it from the release),
  which is a list of calls ``check.<name>(<student names>, seed=...)``;
* runs those checks again here, with its own inputs and oracles, every call of
  student code answered from the recorded evidence;
* replaces the test cell's outputs by its own verdict: nothing (full points) or
  one ``CheckFailed`` line (0), the same sentence a student sees in Validate;
* undoes, after each check, what the replayed calls did to the grader's objects
  (:meth:`course.checks.evidence.Log.undo`): a recorded call that changed the
  oracle model it was handed changes no later check.

Nothing printed, raised or displayed by the kernel in a test cell survives, so a
kernel that patches the checks, the comparisons or its own error display changes
only the evidence, and wrong evidence fails. A test cell without evidence (its
answer was never defined, the kernel died) earns 0 with the kernel's error name
and message, never a traceback of the test cell.

:class:`DrawSeeds` runs first: it replaces every ``seed=N`` of the hidden tests
with a number drawn for this student and this grading run, so answers
precomputed for the seeds written in ``source/`` earn nothing.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import re
import secrets

from nbformat import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool

from ...checks import CheckFailed, evidence
from ...i18n import N_, say
from ..cells import (
    HIDDEN,
    MISTAKES,
    SEED,
    error_output,
    grade_id,
    has_hidden_tests,
    is_answer,
    is_locked,
    is_test,
)
from ..cells import exercise as exercise_of
from ..enames import DEAF, KERNEL_DIED, NOT_RUN, TAMPERED, UNREPLAYABLE
from .scan import parse, read

GRADER_FAULTS = {KERNEL_DIED, DEAF, NOT_RUN}
#: A test cell whose replayed check left a record unused: a call's record comes from
#: its check alone, so the answer's own code published that one.
FORGED = N_(
    "this test cell holds a result its check never asked for, published by the "
    "answer's own code: the test earns 0 and is flagged for your instructor to review"
)


class DrawSeeds(NbGraderPreprocessor):
    """Give the hidden tests seeds nobody knew before this grading run."""

    enabled = Bool(True, help="Draw fresh hidden-test seeds per student and run.").tag(
        config=True
    )

    def preprocess_cell(self, cell, resources, index):
        if is_test(cell) and has_hidden_tests(cell.source):

            def draw(region: re.Match) -> str:
                return SEED.sub(
                    lambda _: f"seed={secrets.randbelow(1_000_000)}", region.group(0)
                )

            cell.source = HIDDEN.sub(draw, cell.source)
        return cell, resources


def check_modules(nb: NotebookNode) -> dict[str, object]:
    """``{alias: module}`` for the ``course.checks`` modules the notebook imports."""
    out = {}
    for cell in nb.cells:
        if cell.cell_type != "code" or not is_locked(cell):
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "course.checks":
                for alias in node.names:
                    out[alias.asname or alias.name] = f"course.checks.{alias.name}"
    return {k: importlib.import_module(v) for k, v in out.items()}


class Stub:
    """Stands for a student's name in a replayed test: only its name is used."""

    def __init__(self, name: str):
        self.__name__ = name

    def __call__(self, *args, **kwargs):  # pragma: no cover - calls go to the log
        raise evidence.Missing(self.__name__)


def planned_calls(source: str, modules: dict) -> list:
    """The test cell's check calls: ``[(function, args, kwargs)]``."""
    calls = []
    for stmt in ast.parse(source).body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # the docstring
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        func = getattr(call, "func", None)
        if not (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in modules
        ):
            raise ValueError(f"not a check call: {ast.unparse(stmt)[:80]}")
        args = [_argument(a) for a in call.args]
        kwargs = {k.arg: _argument(k.value) for k in call.keywords}
        calls.append((getattr(modules[func.value.id], func.attr), args, kwargs))
    return calls


def _argument(node: ast.AST):
    if isinstance(node, ast.Name):
        return Stub(node.id)
    return ast.literal_eval(node)


def _is_evidence(out: dict) -> bool:
    return out.get("output_type") in ("display_data", "execute_result") and (
        evidence.MIME in out.get("data", {})
    )


def _records(cell: NotebookNode) -> list[dict]:
    return [
        o["data"][evidence.MIME] for o in cell.get("outputs", []) if _is_evidence(o)
    ]


def _ename(out: dict) -> str:
    return re.sub(r"\W", "", str(out.get("ename", "Error")))[:40] or "Error"


def raised_before_defining(nb: NotebookNode) -> dict[str, str]:
    """``{name: error name}`` for each name an answer cell binds (anywhere in its
    code) when that cell raised: the error that kept the name undefined."""
    out: dict[str, str] = {}
    for cell in nb.cells:
        if cell.cell_type != "code" or not is_answer(cell):
            continue
        if (error := _failure(cell)) is None:
            continue
        tree = parse(cell.source) or ast.Module(body=[], type_ignores=[])
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                out.setdefault(node.id, _ename(error))
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                out.setdefault(node.name, _ename(error))
    return out


def _kernel_error(
    cell: NotebookNode, raised: dict[str, str] | None = None
) -> NotebookNode | None:
    """The first error the kernel reported in the cell, as one sentence; an
    undefined name that an answer cell failed to define (``raised``) says so."""
    for out in cell.get("outputs", []):
        if out.get("output_type") != "error":
            continue
        if out.get("ename") in GRADER_FAULTS:
            return out  # GuardedExecute's own words
        ename = _ename(out)
        evalue = str(out.get("evalue", ""))[:300]
        undefined = re.fullmatch(r"name '(\w+)' is not defined", evalue)
        if ename == "NameError" and undefined and undefined[1] in (raised or {}):
            sentence = say(
                "`{undefined}` is not defined: its answer cell raised {ename} "
                "before defining it (see that cell's output); fix that cell first.",
                undefined=undefined[1],
                ename=raised[undefined[1]],
            )
        elif ename == "NameError" and undefined:
            sentence = say(
                "`{undefined}` is not defined: write and run its answer cell first.",
                undefined=undefined[1],
            )
        else:
            sentence = say(
                "this test produced no result: {ename}: {evalue}",
                ename=ename,
                evalue=evalue,
            )
        return error_output("CheckFailed", sentence)
    return None


def verdict(
    cell: NotebookNode, modules: dict, raised: dict[str, str] | None = None
) -> tuple[list, str]:
    """``(outputs, log line)`` for one test cell, decided from its evidence
    (``raised``: :func:`raised_before_defining`, to say why a name is missing).
    The keys of the misconceptions a failed check named go in the cell's metadata
    (:data:`~course.grading.cells.MISTAKES`)."""
    printed = io.StringIO()
    cell.get("metadata", {}).pop(MISTAKES, None)
    try:
        calls = planned_calls(cell.source, modules)
    except (ValueError, SyntaxError, AttributeError) as err:
        return [error_output(UNREPLAYABLE, str(err))], f"cannot replay: {err}"
    failed = None
    with evidence.replaying(_records(cell)) as log, contextlib.redirect_stdout(printed):
        try:
            for fn, args, kwargs in calls:
                try:
                    fn(*args, **kwargs)
                finally:
                    log.undo()  # what the student's calls changed ends with the check
        except CheckFailed as err:
            failed = error_output("CheckFailed", str(err))
            if err.mistakes:
                cell.setdefault("metadata", NotebookNode())[MISTAKES] = [*err.mistakes]
        except evidence.Missing as err:
            failed = _kernel_error(cell, raised) or error_output(
                "CheckFailed",
                say("`{err}` gave no result in this test.", err=err),
            )
        except Exception as err:  # noqa: BLE001 - malformed evidence fails, loudly
            failed = error_output(
                "CheckFailed",
                say(
                    "the result could not be read ({type_name}).",
                    type_name=type(err).__name__,
                ),
            )
    if failed is None and log.pos < len(log.records):
        failed = error_output(TAMPERED, say(FORGED))
    outputs = []
    if printed.getvalue():
        outputs.append(
            NotebookNode(output_type="stream", name="stdout", text=printed.getvalue())
        )
    return outputs + ([failed] if failed else []), failed.evalue if failed else "ok"


class JudgeEvidence(NbGraderPreprocessor):
    """Decide every test cell in this process; the kernel's own verdicts are dropped."""

    enabled = Bool(True).tag(config=True)

    def preprocess(self, nb, resources):
        modules = check_modules(nb)
        reading = read(nb, resources)
        shortcuts = reading.verdicts(nb)
        raised = raised_before_defining(nb)
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            if not is_test(cell):  # evidence from given cells is not needed
                cell.outputs = [o for o in cell.outputs if not _is_evidence(o)]
                continue
            name = grade_id(cell)
            if name in shortcuts:
                cell.outputs = [error_output(*shortcuts[name])]
                continue
            cell.outputs, line = verdict(cell, modules, raised)
            self.log.debug("%s: %s", name, line)
        name_upstream_causes(nb, reading.needs)
        return nb, resources


def _failure(cell: NotebookNode) -> NotebookNode | None:
    """The cell's first error output, if any."""
    outputs = cell.get("outputs", [])
    return next((o for o in outputs if o.get("output_type") == "error"), None)


def name_upstream_causes(nb: NotebookNode, needs: dict[str, tuple[str, ...]]) -> None:
    """Start each failed verdict of an exercise whose code uses another exercise
    that failed a test above it with that cause (03: a wrong ``head_params`` makes
    ``project_head`` wrong, whatever ``project_head`` does)."""
    failed_at: dict[str, int] = {}  # exercise -> index of its first failed test
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not is_test(cell):
            continue
        error = _failure(cell)
        if error is None:
            continue
        exercise = exercise_of(grade_id(cell), list(needs))
        failed_at.setdefault(exercise, index)
        causes = [u for u in needs.get(exercise, ()) if failed_at.get(u, index) < index]
        if error.get("ename") != "CheckFailed" or not causes:
            continue
        error.evalue = say(
            "`{cause}`, which `{exercise}` builds on, fails its own tests above: fix "
            "it first, since this verdict may follow from it. {verdict}",
            cause=causes[0],
            exercise=exercise,
            verdict=error.evalue,
        )
        error.traceback = [f"{error.ename}: {error.evalue}"]
