"""Worked answers: sealed in the package, shown only once the student has tried,
never while nbgrader runs, the instructor's alone on a hub that does not give
them; what they show is the course's own solution and mark scheme."""

import json
import re
import shutil

import pytest
from harness import reference_answers

from course import graded, grading, hintbook, i18n, progress, worked
from course.grading import cells
from course.grading.hub import private

A = "05_softmax_and_scaling"
TASK = "why_last_dim"


@pytest.fixture
def work(tmp_path, monkeypatch):
    """A work folder holding the released notebook of ``A``."""
    monkeypatch.delenv(graded.NBGRADER, raising=False)
    monkeypatch.setenv("COURSE_LANG", "en")
    shutil.copytree(grading.ROOT / "release" / A, tmp_path / A)
    return tmp_path


def _tests_of(exercise: str) -> list[str]:
    return hintbook.book()[A][exercise]["tests"]


def test_an_exercise_opens_once_its_tests_pass(work):
    locked = worked.worked("softmax", work=work)
    assert not locked.shown and "softmax" in locked.text and "hint" in locked.text
    store = progress.Store(work, source="kernel")
    first, *rest = _tests_of("softmax")
    store.record(A, "softmax", "fail", test=first)
    assert not worked.worked("softmax", work=work).shown  # failing is no pass
    for test in [first, *rest]:
        store.record(A, "softmax", "pass", test=test)
    shown = worked.worked("softmax", work=work)
    assert shown.shown and shown.text.startswith(
        reference_answers(grading.ROOT, A)["softmax"].strip()
    )
    assert 'data-state="shown"' in shown._repr_html_()
    assert "What its tests check [points]:" in shown.text and "(hidden)" in shown.text


def test_an_exercise_opens_after_every_step_hint_and_not_a_mistake_hint(work):
    store = progress.Store(work, source="kernel")
    store.record(A, "softmax", "hint", hint="mistake:wrong-dim")
    steps = hintbook.book()[A]["softmax"]["steps"]
    for n in range(1, steps):
        store.record(A, "softmax", "hint", hint=str(n))
    assert not worked.worked("softmax", work=work).shown  # one step still hidden
    store.record(A, "softmax", "hint", hint=str(steps))
    assert worked.worked("softmax", work=work).shown


def _answer(work, text: str) -> None:
    path = work / A / f"{A}.ipynb"
    nb = json.loads(path.read_text())
    ids = [c["id"] for c in nb["cells"]]
    nb["cells"][ids.index(TASK) + 1]["source"] = text
    path.write_text(json.dumps(nb))


@pytest.mark.parametrize("lang", list(i18n.EDITIONS))
def test_a_written_answer_opens_once_the_student_wrote_one(work, lang, monkeypatch):
    monkeypatch.setenv("COURSE_LANG", lang)
    assert not worked.worked(TASK, work=work).shown  # the release's stub
    _answer(work, "  \n")
    assert not worked.worked(TASK, work=work).shown
    _answer(work, "Because each query's weights are over the keys.")
    shown = worked.worked(TASK, work=work)
    edition = i18n.edition_root(grading.ROOT, lang)
    source = json.loads(grading.notebook_path(edition, "source", A).read_text())
    task = next(c for c in source["cells"] if cells.grade_id(c) == TASK)
    scheme = cells.MARK_SCHEME.search("".join(task["source"]))[1].strip()
    assert shown.shown and shown.text == scheme
    assert (
        ("Rubric" in scheme) if lang == "en" else re.search("[\u4e00-\u9fff]", scheme)
    )


def test_nothing_while_nbgrader_runs(work, monkeypatch):
    store = progress.Store(work, source="kernel")
    for test in _tests_of("softmax"):
        store.record(A, "softmax", "pass", test=test)
    monkeypatch.setenv(graded.NBGRADER, "1")
    got = worked.worked("softmax", work=work)
    assert not got.shown and got.text == "" and "nbgrader" in got.title


def test_on_a_hub_that_does_not_give_them_they_are_the_instructors(
    tmp_path, monkeypatch
):
    state = tmp_path / "state"
    state.mkdir()
    kept = private.secrets(project=grading.ROOT, course_root=grading.ROOT, state=state)
    given = private.secrets(
        project=grading.ROOT, course_root=grading.ROOT, state=state, worked_answers=True
    )
    files = {worked.path(lang) for lang in i18n.EDITIONS}
    assert files <= set(kept) and not files & set(given)

    def sealed(lang):
        raise PermissionError(worked.path(lang))

    monkeypatch.setattr(worked, "_answers", sealed)
    got = worked.worked("softmax", work=tmp_path)
    assert not got.shown and "instructor" in got.title


def test_the_package_holds_every_item_sealed_and_nothing_else():
    for lang in i18n.EDITIONS:
        edition = i18n.edition_root(grading.ROOT, lang)
        answers = json.loads(worked.path(lang).read_text())
        for name in grading.assignments(edition):
            nb = json.loads(grading.notebook_path(edition, "source", name).read_text())
            items = {
                cells.grade_id(c)
                for c in nb["cells"]
                if (cells.is_answer(c) and c["cell_type"] == "code")
                or c["metadata"].get("nbgrader", {}).get("task")
            }
            assert set(answers[name]) == items, (lang, name)
            for item, entry in answers[name].items():
                assert set(entry) == {"kind", "sealed"}
                opened = worked.unseal(f"{name}/{item}", entry["sealed"])
                assert opened and opened not in json.dumps(answers)


def test_an_unknown_item_names_the_known_ones(work):
    got = worked.worked("nope", work=work)
    assert not got.shown and "nope" in got.title and "softmax" in got.text
