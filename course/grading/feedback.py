"""Feedback preprocessor: test cells keep their verdicts but show no code paths.

``ClearHiddenTests`` already removes hidden test regions from the cell sources. A
traceback can still quote them (an exception raised straight from a test cell), so
every error output of a test cell is reduced to its one-line verdict.
"""

from nbconvert.preprocessors import Preprocessor


class RedactTestCells(Preprocessor):
    """Replace each test cell's error traceback by ``Name: message``."""

    def preprocess_cell(self, cell, resources, index):
        grading = cell.metadata.get("nbgrader", {})
        if (
            cell.cell_type == "code"
            and grading.get("grade")
            and not grading.get("solution")
        ):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [
                        f"{output.get('ename')}: {output.get('evalue')}"
                    ]
        return cell, resources
