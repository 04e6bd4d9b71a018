"""course.grading.feedback_page: nbgrader's feedback page in the course's language."""

import shutil

import pytest

from course.grading import feedback_page
from course.i18n import say


def test_feedback_template_speaks_the_language(monkeypatch, tmp_path):
    """Every label of nbgrader's feedback page in Chinese, the template code kept."""
    monkeypatch.setenv("COURSE_LANG", "zh")
    folder = feedback_page.feedback_template(tmp_path)
    text = (folder / "index.html.j2").read_text()
    assert folder.parent.name == "zh" and folder.name == "feedback"
    assert (folder / "conf.json").exists()
    for snippet, label in feedback_page.LABELS:
        assert snippet not in text, snippet
        assert snippet.replace(label, say(label)) in text
    original = feedback_page.nbgrader_feedback_template() / "feedback" / "index.html.j2"
    assert text.count("{{") == original.read_text().count("{{")


def test_a_label_nbgrader_moved_is_one_sentence(monkeypatch, tmp_path):
    """An nbgrader release whose feedback template lacks a label's snippet."""
    moved = tmp_path / "nbgrader" / "feedback"
    shutil.copytree(feedback_page.nbgrader_feedback_template() / "feedback", moved)
    page = moved / "index.html.j2"
    page.write_text(page.read_text().replace("<b>Comments:</b>", "<b>Notes:</b>"))
    monkeypatch.setattr(
        feedback_page, "nbgrader_feedback_template", lambda: moved.parent
    )
    with pytest.raises(ValueError, match="Comments"):
        feedback_page.feedback_template(tmp_path / "out")
