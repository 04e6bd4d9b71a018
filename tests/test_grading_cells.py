"""One home for nbgrader's conventions: cell roles, markers, grade ids, folders."""

import json
import re
from pathlib import Path

import nbformat
import pytest

from course import authoring
from course.grading import cells


def _cell(cell_type="code", source="", **meta):
    return {"cell_type": cell_type, "source": source, "metadata": {"nbgrader": meta}}


ROLES = [  # (cell, is_test, is_answer, is_locked), as authoring writes them
    (_cell(grade=True, solution=False, locked=True, grade_id="test_f_x"), 1, 0, 1),
    (_cell(grade=False, solution=True, locked=False, grade_id="f"), 0, 1, 0),
    (_cell(grade=False, solution=False, locked=True, grade_id="code-03"), 0, 0, 1),
    (_cell("markdown", task=True, locked=True, grade_id="why"), 0, 0, 1),
    (_cell("markdown", grade=True, solution=True, grade_id="essay"), 0, 1, 0),
    ({"cell_type": "code", "source": "", "metadata": {}}, 0, 0, 0),
]


@pytest.mark.parametrize("cell,test,answer,locked", ROLES)
def test_roles_are_nbgraders(cell, test, answer, locked):
    node = nbformat.from_dict(cell)
    for given in (cell, node):  # plain JSON and nbformat's node alike
        assert cells.is_test(given) == bool(test)
        assert cells.is_answer(given) == bool(answer)
        assert cells.is_locked(given) == bool(locked)


@pytest.mark.parametrize(
    "meta",
    [  # what source/NN/NN.py's cell options become
        {"test": "test_softmax_rows", "points": 1},
        {"answer": "softmax"},
        {"task": "why_scale", "points": 2},
        {},
    ],
)
def test_roles_of_the_cells_authoring_writes(meta):
    nb_meta = authoring._nbgrader(dict(meta), "code", 3)
    cell = {"cell_type": "code", "source": "", "metadata": {"nbgrader": nb_meta}}
    assert cells.is_test(cell) == ("test" in meta)
    assert cells.is_answer(cell) == ("answer" in meta)
    assert cells.grade_id(cell) == meta.get(
        "test", meta.get("answer", meta.get("task", "code-03"))
    )


@pytest.mark.parametrize(
    "name,trait",
    [
        ("BEGIN_SOLUTION", "### BEGIN SOLUTION"),
        ("END_SOLUTION", "### END SOLUTION"),
        ("BEGIN_HIDDEN", "### BEGIN HIDDEN TESTS"),
        ("END_HIDDEN", "### END HIDDEN TESTS"),
        ("BEGIN_MARK_SCHEME", "### BEGIN MARK SCHEME"),
        ("END_MARK_SCHEME", "### END MARK SCHEME"),
    ],
)
def test_markers_are_nbgraders_and_the_notebooks_use_them(name, trait):
    assert getattr(cells, name) == trait
    assert cells.MARKER_LINE.match(f"    {trait}")


def test_every_notebook_marker_is_one_of_them():
    markers = {getattr(cells, n) for n in dir(cells) if n.startswith(("BEGIN", "END"))}
    seen = set()
    for path in sorted(Path(cells.__file__).parents[2].glob("source/*/*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            for line in "".join(cell["source"]).splitlines():
                if cells.MARKER_LINE.match(line):
                    seen.add(line.strip())
    assert seen and seen <= markers, seen - markers


@pytest.mark.parametrize(
    "source,hidden,seeds",
    [
        ("check.f(f)\n", [], []),
        (
            "check.f(f)\n### BEGIN HIDDEN TESTS\ncheck.f_random(f, seed=12)\n"
            "### END HIDDEN TESTS\n",
            ["\ncheck.f_random(f, seed=12)\n"],
            ["seed=12"],
        ),
        ("x = myseed=3\n", [], []),  # a name that ends in seed is no seed
    ],
)
def test_hidden_tests_and_seeds(source, hidden, seeds):
    assert cells.HIDDEN.findall(source) == hidden
    assert cells.has_hidden_tests(source) == bool(hidden)
    assert cells.SEED.findall(source) == seeds


@pytest.mark.parametrize(
    "test_id,exercise",
    [
        ("test_split_heads_shape", "split_heads"),
        ("test_split_heads_random", "split_heads"),
        ("test_merge_heads_values", "merge_heads"),
        ("test_softmax_stable_rows", "softmax_stable"),  # the longest answer name
        ("test_softmax_rows", "softmax"),
        ("test_unknown_x", "test_unknown_x"),
    ],
)
def test_a_test_cell_names_its_exercise(test_id, exercise):
    answers = ["split_heads", "merge_heads", "softmax", "softmax_stable"]
    assert cells.is_test_id(test_id)
    assert cells.exercise(test_id, answers) == exercise


@pytest.mark.parametrize(
    "stage,student,expected",
    [
        ("source", None, "source/01_config"),
        ("release", None, "release/01_config"),
        ("submitted", "ana", "submitted/ana/01_config"),
        ("autograded", "ana", "autograded/ana/01_config"),
        ("feedback", "ana", "feedback/ana/01_config"),
    ],
)
def test_folders_follow_nbgraders_directory_structure(
    tmp_path, stage, student, expected
):
    assert (
        cells.folder(tmp_path, stage, "01_config", student=student)
        == tmp_path / expected
    )
    path = cells.notebook_path(tmp_path, stage, "01_config", student=student)
    assert path == tmp_path / expected / "01_config.ipynb"
    assert cells.stage_folder(tmp_path, stage) == tmp_path / expected.split("/")[0]


def test_error_messages_and_test_sources(tmp_path):
    test = _cell(grade=True, solution=False, grade_id="test_f_x")
    test["source"] = "check.f(f)"
    test["outputs"] = [
        {"output_type": "error", "ename": "CheckFailed", "evalue": "f is wrong"}
    ]
    answer = _cell(solution=True, grade_id="f")
    answer["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "hi"}]
    nb = {"cells": [test, answer]}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    assert cells.error_messages(path) == {"test_f_x": "CheckFailed: f is wrong"}
    assert cells.test_sources(nb) == {"test_f_x": "check.f(f)"}
    assert re.fullmatch(r"test_\w+", next(iter(cells.test_sources(nb))))
