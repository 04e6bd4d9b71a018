"""Flags come from what the grading steps wrote as data, never from printed text."""

import nbformat
import pytest

from course.grading.enames import DEAF, KERNEL_DIED, NOT_RUN, TAMPERED
from course.grading.steps import flags


def _nb(*outputs, metadata=None):
    cell = nbformat.v4.new_code_cell("x = 1")
    cell.metadata["nbgrader"] = {"grade_id": "f", "solution": True}
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    nb = nbformat.v4.new_notebook(cells=[cell])
    nb.metadata.update(metadata or {})
    return nb


def _error(ename, evalue=""):
    return {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": []}


def _stream(text):
    return {"output_type": "stream", "name": "stdout", "text": text}


@pytest.mark.parametrize(
    "outputs,metadata,expected",
    [
        ([_stream("... Output truncated ...\n")], None, []),  # a student's print
        ([], {flags.KEY: {flags.TRUNCATED: True}}, ["output was truncated"]),
        ([_error(TAMPERED, "patches check: x")], None, ["tampering: patches check"]),
        ([_error(NOT_RUN, "not run: the end")], None, ["later cells not run: the end"]),
        ([_error(KERNEL_DIED, "died")], None, ["cell f: died"]),
        ([_error(DEAF)], None, ["cell f: timed out and was interrupted"]),
        (
            [_error("MemoryError")],
            None,
            ["cell f ran out of memory (the per-kernel limit)"],
        ),
        ([_error("CheckFailed", "wrong")], None, []),
    ],
)
def test_flags(outputs, metadata, expected):
    assert flags.flags(_nb(*outputs, metadata=metadata)) == expected


@pytest.mark.parametrize("lines,cut", [(5, False), (2000, True)])
def test_the_line_limit_records_that_it_cut(lines, cut):
    nb = _nb(_stream("line\n" * lines))
    nb, _ = flags.LimitOutput().preprocess(nb, {})
    assert (flags.TRUNCATED in nb.metadata.get(flags.KEY, {})) == cut
    assert flags.flags(nb) == (["output was truncated"] if cut else [])
