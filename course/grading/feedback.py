"""Feedback preprocessors: verdicts stay, hidden tests and code paths do not.

``ClearHiddenTests`` removes the hidden regions from the test cells' sources. Two
more places can still show them: a traceback that quotes a test cell, and any
output a student's own cell printed while grading ran (code can read the cells
the kernel executed, hidden ones included). :class:`ScrubHiddenTests` removes
every line of output that quotes a hidden test; :class:`RedactTestCells` reduces
every error output of a test cell to its one-line verdict.
"""

import re

from nbconvert.preprocessors import Preprocessor

from ..i18n import N_, say

HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS(.*?)### END HIDDEN TESTS", re.S)
REMOVED = N_("[a line quoting a hidden test was removed]")


def _is_test(cell) -> bool:
    grading = cell.metadata.get("nbgrader", {})
    return (
        cell.cell_type == "code"
        and grading.get("grade")
        and not grading.get("solution")
    )


QUOTES = re.compile(r"HIDDEN TESTS|seed=\d|\bcheck\.\w+\(")  # whatever the order


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
            if _is_test(cell)
            for region in HIDDEN.findall(cell.source)
            for line in region.splitlines()
            if len(line.strip()) > 8
        }
        secrets |= set(re.findall(r"seed=\d+", " ".join(secrets)))
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
        if _is_test(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [
                        f"{output.get('ename')}: {output.get('evalue')}"
                    ]
        return cell, resources
