"""course.grading.steps.feedback: what a student's feedback may not show."""

import shutil

import nbformat
import pytest

from course.grading.steps import feedback
from course.grading.steps.feedback import REMOVED, ScrubHiddenTests
from course.i18n import say

TEST = '"""softmax is right."""\n### BEGIN HIDDEN TESTS\ncheck.softmax_random(softmax, seed=932194)\n### END HIDDEN TESTS'


def test_output_quoting_a_hidden_test_loses_those_lines():
    test = nbformat.v4.new_code_cell(TEST)
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "t"}
    printed = "In [3]:\n" + TEST + "\nseed=932194 was it\nmy own line"
    answer = nbformat.v4.new_code_cell("print('\\n'.join(In))")
    answer.outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed)]
    nb = nbformat.v4.new_notebook(cells=[test, answer])
    ScrubHiddenTests().preprocess(nb, {})
    text = nb.cells[1].outputs[0]["text"]
    for secret in ("BEGIN HIDDEN", "END HIDDEN", "seed=932194", "softmax_random"):
        assert secret not in text
    assert "my own line" in text and REMOVED in text


def test_feedback_template_speaks_the_language(monkeypatch, tmp_path):
    """Every label of nbgrader's feedback page in Chinese, the template code kept."""
    monkeypatch.setenv("COURSE_LANG", "zh")
    folder = feedback.feedback_template(tmp_path)
    text = (folder / "index.html.j2").read_text()
    assert folder.parent.name == "zh" and folder.name == "feedback"
    assert (folder / "conf.json").exists()
    for snippet, label in feedback.LABELS:
        assert snippet not in text, snippet
        assert snippet.replace(label, say(label)) in text
    original = feedback.nbgrader_feedback_template() / "feedback" / "index.html.j2"
    assert text.count("{{") == original.read_text().count("{{")


def test_a_label_nbgrader_moved_is_one_sentence(monkeypatch, tmp_path):
    """An nbgrader release whose feedback template lacks a label's snippet."""
    moved = tmp_path / "nbgrader" / "feedback"
    shutil.copytree(feedback.nbgrader_feedback_template() / "feedback", moved)
    page = moved / "index.html.j2"
    page.write_text(page.read_text().replace("<b>Comments:</b>", "<b>Notes:</b>"))
    monkeypatch.setattr(feedback, "nbgrader_feedback_template", lambda: moved.parent)
    with pytest.raises(ValueError, match="Comments"):
        feedback.feedback_template(tmp_path / "out")
