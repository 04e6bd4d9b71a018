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

from ..checks import CheckFailed, evidence
from ..i18n import say
from .cells import (
    HIDDEN,
    SEED,
    error_output,
    grade_id,
    has_hidden_tests,
    is_locked,
    is_test,
)
from .enames import DEAF, KERNEL_DIED, NOT_RUN, UNREPLAYABLE
from .scan import read

GRADER_FAULTS = {KERNEL_DIED, DEAF, NOT_RUN}


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


def _kernel_error(cell: NotebookNode) -> NotebookNode | None:
    """The first error the kernel reported in the cell, as one sentence."""
    for out in cell.get("outputs", []):
        if out.get("output_type") != "error":
            continue
        if out.get("ename") in GRADER_FAULTS:
            return out  # GuardedExecute's own words
        ename = re.sub(r"\W", "", str(out.get("ename", "Error")))[:40] or "Error"
        evalue = str(out.get("evalue", ""))[:300]
        undefined = re.fullmatch(r"name '(\w+)' is not defined", evalue)
        if ename == "NameError" and undefined:
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


def verdict(cell: NotebookNode, modules: dict) -> tuple[list, str]:
    """``(outputs, log line)`` for one test cell, decided from its evidence."""
    printed = io.StringIO()
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
        except evidence.Missing as err:
            failed = _kernel_error(cell) or error_output(
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
        shortcuts = read(nb, resources).verdicts(nb)
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
            cell.outputs, line = verdict(cell, modules)
            self.log.debug("%s: %s", name, line)
        return nb, resources
