"""course.grading.steps.feedback: what a student's feedback may not show."""

import nbformat

from course.grading.steps.feedback import REMOVED, ScrubHiddenTests

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
