"""The course the package ships for ``course check``: up to date, the very release
a student gets, and the instructor's gradebook, with no solution in it."""

import json

import pytest
from nbgrader.api import Gradebook

from course import grading, i18n
from course.grading import cells, shipped


def test_the_shipped_course_is_up_to_date():
    assert shipped.stale() == [], "run `make release`"


def test_a_stale_or_extra_file_is_found(tmp_path):
    for path, text in shipped.build().items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    assert shipped.stale(shipped=tmp_path) == []
    nb = next(tmp_path.glob("source/*/*.ipynb"))
    nb.write_text(nb.read_text().replace("check.", "check_."))
    (tmp_path / "source" / "extra.txt").write_text("x")
    assert shipped.stale(shipped=tmp_path) == sorted(
        [nb.relative_to(tmp_path), nb.parent.parent.relative_to(tmp_path) / "extra.txt"]
    )


def test_no_answer_and_every_hidden_test_ships():
    """Each shipped test cell is the instructor's; no answer cell holds more than
    the markers of its emptied solution regions."""
    for lang in i18n.EDITIONS:
        edition = i18n.edition_root(grading.ROOT, lang)
        for name in grading.assignments(edition):
            source = json.loads(
                grading.notebook_path(edition, "source", name).read_text()
            )
            ours = shipped.SHIPPED / i18n.EDITIONS[lang] / "source" / name
            mine = json.loads((ours / f"{name}.ipynb").read_text())
            theirs = {cells.grade_id(c): c for c in source["cells"]}
            hidden = 0
            for cell in mine["cells"]:
                text = "".join(cell["source"])
                if cells.is_test(cell):
                    assert text == "".join(theirs[cells.grade_id(cell)]["source"])
                    hidden += cells.BEGIN_HIDDEN in text
                where = (lang, name, cells.grade_id(cell))
                assert not cells.MARK_SCHEME.search(text), where
                regions = list(cells.SOLUTION_REGION.finditer(text))  # each one empty
                assert text.count(cells.BEGIN_SOLUTION) == len(regions), where
                assert all(m[2] == "" for m in regions), where
            assert hidden, (lang, name)


def _grade_cells(root, names):
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        return {
            (name, cell.name): (cell.max_score, cell.cell_type, source.source)
            for name in names
            for nb in gb.find_assignment(name).notebooks
            for cell in nb.grade_cells
            for source in [gb.find_source_cell(cell.name, nb.name, name)]
        }


@pytest.mark.slow
@pytest.mark.parametrize("lang", list(i18n.EDITIONS))
def test_the_shipped_course_releases_what_students_get_and_grades_as_the_source(
    lang, tmp_path
):
    """Released from the shipped course: the committed release/, byte for byte,
    and a gradebook with the source's test cells, points and hidden tests."""
    edition = i18n.edition_root(grading.ROOT, lang)
    names = grading.assignments(edition)
    mine = grading.make_course(tmp_path / "shipped", shipped.SHIPPED, lang=lang)
    grading.release(["*"], mine)
    theirs = grading.make_course(tmp_path / "source", grading.ROOT, lang=lang)
    grading.release(["*"], theirs)
    for name in names:
        committed = grading.notebook_path(edition, "release", name).read_text()
        assert grading.notebook_path(mine, "release", name).read_text() == committed
    ours, source = _grade_cells(mine, names), _grade_cells(theirs, names)
    assert ours == source
    assert sum(cells.BEGIN_HIDDEN in text for *_, text in ours.values()) >= len(names)
