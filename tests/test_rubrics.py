"""The written answers' model answers and rubrics: the grader's, never a student's.

Each written-answer task cell of ``source/`` holds, in both editions, a model answer
and a point-by-point rubric between nbgrader's mark-scheme lines
(``=== BEGIN MARK SCHEME ===`` / ``=== END MARK SCHEME ===``).
``nbgrader generate_assignment`` leaves the region out of ``release/`` (its
``ClearMarkScheme``) after saving the whole cell in the gradebook; autograde puts
the gradebook's task cells back, so the autograded notebook that formgrader shows
holds the rubric; ``generate_feedback`` runs ``ClearMarkScheme`` again
(``nbgrader_config.py``), so feedback does not.
"""

import json
import re
from pathlib import Path

import pytest
from harness import autograde, submissions
from nbconvert import HTMLExporter
from nbgrader.server_extensions.formgrader import handlers

from course import grading, i18n
from course.grading import settings

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "=== BEGIN MARK SCHEME ===", "=== END MARK SCHEME ==="
REGION = re.compile(re.escape(BEGIN) + r"\n(.*?)\n" + re.escape(END), re.S)
# Per edition: the model answer's label, the rubric's heading, a rubric line.
LABELS = {
    "en": (
        "**Model answer.**",
        re.compile(r"\*\*Rubric \((\d+) points?\)\.\*\*"),
        re.compile(r"^\* (\d+(?:\.\d+)?) points?: ", re.M),
    ),
    "zh": (
        "**参考答案**：",
        re.compile(r"\*\*评分要点（(\d+) 分）\*\*："),
        re.compile(r"^\* (\d+(?:\.\d+)?) 分：", re.M),
    ),
}
EDITIONS = ("en", "zh")


def _notebooks(lang: str, folder: str):
    base = i18n.edition_root(ROOT, lang) / folder
    return sorted(base.glob("*/*.ipynb"))


def _tasks(lang: str) -> dict[str, tuple[float, str]]:
    """``{grade id: (points, cell source)}`` of every task cell of ``source/``."""
    out = {}
    for path in _notebooks(lang, "source"):
        for cell in json.loads(path.read_text("utf-8"))["cells"]:
            meta = cell["metadata"].get("nbgrader", {})
            if meta.get("task"):
                out[meta["grade_id"]] = (meta["points"], "".join(cell["source"]))
    return out


def _rubric_lines(lang: str) -> list[str]:
    """Every line of every model answer and rubric (a piece each, to look for)."""
    return [
        line.strip("* ").strip()
        for _, source in _tasks(lang).values()
        for region in REGION.findall(source)
        for line in region.splitlines()
        if len(line.strip("* ").strip()) > 12
    ]


@pytest.mark.parametrize("lang", EDITIONS)
def test_every_written_answer_has_a_model_answer_and_a_rubric(lang):
    tasks = _tasks(lang)
    assert len(tasks) == 13 and sum(p for p, _ in tasks.values()) == 21
    answer, heading, line = LABELS[lang]
    for grade_id, (points, source) in tasks.items():
        regions = REGION.findall(source)
        assert len(regions) == 1, (lang, grade_id, "one mark scheme region")
        region = regions[0]
        assert region.startswith(answer), (lang, grade_id)
        model = region[len(answer) : region.index("**", len(answer))]
        assert len(model.split()) >= 20 or len(model) >= 80, (lang, grade_id)
        found = heading.search(region)
        assert found and int(found.group(1)) == points, (lang, grade_id, points)
        parts = [float(p) for p in line.findall(region)]
        assert len(parts) >= 2 and sum(parts) == points, (lang, grade_id, parts)


def test_both_editions_have_the_same_rubric_points():
    for (gid, (_, en)), (zid, (_, zh)) in zip(
        _tasks("en").items(), _tasks("zh").items(), strict=True
    ):
        assert gid == zid
        parts = [LABELS[lang][2].findall(s) for lang, s in (("en", en), ("zh", zh))]
        assert parts[0] == parts[1], gid


@pytest.mark.parametrize("lang", EDITIONS)
def test_no_rubric_in_the_release(lang):
    lines = _rubric_lines(lang)
    assert len(lines) > 39  # thirteen tasks: an answer and a rubric each, lines each
    notebooks = _notebooks(lang, "release")
    assert len(notebooks) == 13
    for path in notebooks:
        text = "".join(
            "".join(c["source"]) for c in json.loads(path.read_text("utf-8"))["cells"]
        )
        assert "MARK SCHEME" not in text, path
        assert LABELS[lang][0] not in text, path
        for line in lines:
            assert line not in text, (path, line)


@pytest.mark.slow
@pytest.mark.parametrize("lang", EDITIONS)
def test_the_grader_sees_the_rubric_and_the_feedback_does_not(lang, tmp_path):
    """A real release, autograde and feedback of 01_config in a course copy."""
    assignment = "01_config"
    root = grading.make_course(tmp_path / "course", lang=lang)
    grading.release([assignment], root)
    release = grading.notebook_path(root, "release", assignment).read_text("utf-8")
    subs = {k: v for k, v in submissions(root, assignment).items() if k == "reference"}
    autograde(root, assignment, subs)
    _, source = _tasks(lang)["why_out_in"]
    model = REGION.search(source).group(1).splitlines()[0]  # the model answer's start
    assert model not in release and "MARK SCHEME" not in release
    # formgrader shows the autograded notebook through an HTMLExporter built with
    # the course's config (nbgrader's FormgradeExtension: HTMLExporter(config=...))
    graded = grading.notebook_path(root, "autograded", assignment, student="reference")
    config = settings.load(root)  # the edition's config, this process's language kept
    config.HTMLExporter.template_name = "formgrade"  # FormgradeExtension's own
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    resources = {  # what formgrader's SubmissionHandler passes
        "assignment_id": assignment,
        "notebook_id": assignment,
        "submission_id": "x",
        "index": 0,
        "total": 1,
        "base_url": "",
        "student": "reference",
        "last_name": None,
        "first_name": None,
        "notebook_path": str(graded),
    }
    exporter = HTMLExporter(config=config)
    page, _ = exporter.from_filename(str(graded), resources=resources)
    assert BEGIN in page and _html(model) in page
    grading.nbgrader("generate_feedback", assignment, "--force", root=root)
    feedback = root / "feedback" / "reference" / assignment / f"{assignment}.html"
    html = feedback.read_text("utf-8")
    assert "MARK SCHEME" not in html and _html(model) not in html
    assert "why_out_in" in html  # the task cell itself is still there
    for line in _rubric_lines(lang):
        assert _html(line) not in html, line


def _html(text: str) -> str:
    """A piece of markdown as it appears in rendered HTML: words only."""
    return max(re.split(r"[`*_<>&\"']", text), key=len).strip()
