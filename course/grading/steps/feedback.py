"""Feedback preprocessors: verdicts stay, hidden tests and code paths do not.

``ClearHiddenTests`` removes the hidden regions from the test cells' sources. Two
more places can still show them: a traceback that quotes a test cell, and any
output a student's own cell printed while grading ran (code can read the cells
the kernel executed, hidden ones included). :class:`ScrubHiddenTests` removes
every line of output that quotes a hidden test; :class:`RedactTestCells` reduces
every error output of a test cell to its one-line verdict. Where hints cost points
(:mod:`course.grading.run.hintcharge`), :class:`ExplainHintCharges` says under each
test cell what its hints took.
"""

import re

from nbconvert.preprocessors import Preprocessor

from ...i18n import N_, say
from ..cells import BEGIN_HIDDEN, COMMENT, END_HIDDEN, HIDDEN, SEED, grade_id, is_test

REMOVED = N_("[a line quoting a hidden test was removed]")
# A line that quotes a hidden test: a hidden marker, a seed, a check call.
QUOTES = re.compile(
    "|".join(
        [
            *(re.escape(m.removeprefix(COMMENT)) for m in (BEGIN_HIDDEN, END_HIDDEN)),
            SEED.pattern,
            r"\bcheck\.\w+\(",
        ]
    )
)


def _scrub(text: str, secrets: set[str]) -> str:
    lines = text.split("\n")
    return "\n".join(
        say(REMOVED) if QUOTES.search(ln) or any(s in ln for s in secrets) else ln
        for ln in lines
    )


class ScrubHiddenTests(Preprocessor):
    """Remove output lines that quote hidden test code (runs before the clearing)."""

    def preprocess(self, nb, resources):
        secrets = {
            line.strip()
            for cell in nb.cells
            if is_test(cell)
            for region in HIDDEN.findall(cell.source)
            for line in region.splitlines()
            if len(line.strip()) > 8
        }
        secrets |= set(SEED.findall(" ".join(secrets)))
        for cell in nb.cells:
            for output in cell.get("outputs", []):
                if "text" in output:
                    output["text"] = _scrub(output["text"], secrets)
                for key in ("evalue",):
                    if key in output:
                        output[key] = _scrub(output[key], secrets)
                if "traceback" in output:
                    output["traceback"] = [
                        _scrub(t, secrets) for t in output["traceback"]
                    ]
                for mime, value in output.get("data", {}).items():
                    if isinstance(value, str) and mime.startswith("text/"):
                        output["data"][mime] = _scrub(value, secrets)
        return nb, resources


class RedactTestCells(Preprocessor):
    """Replace each test cell's error traceback by ``Name: message``."""

    def preprocess_cell(self, cell, resources, index):
        if is_test(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [
                        f"{output.get('ename')}: {output.get('evalue')}"
                    ]
        return cell, resources


CHARGED = "course-hint-charge"  # marks the output that says what hints took


class ExplainHintCharges(Preprocessor):
    """Under each test cell whose points hints took (a negative extra credit in
    the gradebook), one line that says how many: the score's reason, in the
    student's feedback."""

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook, MissingEntry

        ids = resources.get("nbgrader", {})
        if not ids.get("db_url"):
            return nb, resources
        with Gradebook(ids["db_url"]) as gb:
            for cell in nb.cells:
                if not is_test(cell) or any(
                    o.get("metadata", {}).get(CHARGED) for o in cell.get("outputs", [])
                ):
                    continue
                try:
                    grade = gb.find_grade(
                        grade_id(cell),
                        ids["notebook"],
                        ids["assignment"],
                        ids["student"],
                    )
                except MissingEntry:
                    continue
                if grade.extra_credit is not None and grade.extra_credit < 0:
                    cell.outputs.append(_charge_output(-grade.extra_credit))
        return nb, resources


def _charge_output(points: float):
    from nbformat.v4 import new_output

    text = say(
        "Hints you asked on this exercise took {points:g} of this cell's points "
        "(your instructor's hint policy).",
        points=points,
    )
    out = new_output("stream", name="stdout", text=text + "\n")
    out.metadata = {CHARGED: True}
    return out
