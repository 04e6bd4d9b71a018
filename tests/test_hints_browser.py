"""A student alone in JupyterLab (Chromium), in each edition: a test of softmax
fails and names the mistake, the student asks for two hints (the first answers
that mistake), fixes the answer, and the progress view follows.

JupyterLab is started as a student starts it, ``course lab``, on a copy of the
course whose ``mywork/`` already holds the notebook with the mistake in it.
Screenshots of the hint and progress views go to ``reports/hints/``.
"""

import json

import pytest
from browser import browser, cell, run_cell
from services import course_lab

from course import grading, i18n

pytestmark = pytest.mark.slow  # JupyterLab in Chromium

ASSIGNMENT = "05_softmax_and_scaling"
REPORTS = grading.ROOT / "reports" / "hints"
WRONG = """def softmax(scores, dim=-1):
    e = (scores - scores.amax()).exp()
    return e / e.sum(0, keepdim=True)"""
RIGHT = """def softmax(scores, dim=-1):
    e = (scores - scores.amax(dim, keepdim=True)).exp()
    return e / e.sum(dim, keepdim=True)"""
ASKS = ['check.hint("softmax")', 'check.hint("softmax")']
VIEW = "from course import progress\nprogress.show()"
SAID = {  # each edition's words: the mistake's hint, the first step, the states,
    # and the mistake as the progress view names it (its check's sentence)
    "en": ("wrong axis", "Softmax turns", "failing", "passing", "rows do not sum"),
    "zh": ("沿错了维度", "softmax 把", "未通过", "已通过", "每行之和不为 1"),
}


def _notebook(lang: str) -> dict:
    """The released notebook, cut to its first exercise: the title, the setup,
    the answer with a mistake, its first test, two hint requests, the view."""
    edition = i18n.edition_root(grading.ROOT, lang)
    nb = json.loads(grading.notebook_path(edition, "release", ASSIGNMENT).read_text())
    cells = {c["id"]: c for c in nb["cells"]}
    cells["softmax"]["source"] = WRONG
    # The setup cell without the model (softmax's tests need none): a faster start.
    lines = cells["code-01"]["source"]
    lines = lines if isinstance(lines, str) else "".join(lines)
    cells["code-01"]["source"] = [x for x in lines.splitlines() if "checks" in x][0]
    extra = [
        {"cell_type": "code", "id": f"ask-{i}", "metadata": {}, "source": code,
         "outputs": [], "execution_count": None}
        for i, code in enumerate([*ASKS, VIEW])
    ]  # fmt: skip
    keep = ["markdown-00", "code-01", "softmax", "test_softmax_rows"]
    nb["cells"] = [cells[k] for k in keep] + extra
    return nb


@pytest.fixture(params=["en", "zh"])
def lab(request, tmp_path):
    """``course lab`` in one edition, its mywork holding the notebook above."""
    lang = request.param
    with course_lab(
        tmp_path, lang=lang, assignment=ASSIGNMENT, notebook=_notebook(lang)
    ) as (url, notebook):
        yield url, lang, notebook.parent.parent


def test_a_student_asks_for_hints_fixes_the_answer_and_sees_progress(lab):
    url, lang, work = lab
    mistake, first_step, failing, passing, named = SAID[lang]
    REPORTS.mkdir(parents=True, exist_ok=True)
    with browser() as (ctx, blocked):
        page = ctx.new_page()
        page.set_viewport_size({"width": 1200, "height": 1000})
        page.goto(f"{url}/lab/tree/{ASSIGNMENT}/{ASSIGNMENT}.ipynb")
        page.wait_for_selector(
            ".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60000
        )
        for index in (1, 2):  # the setup, the answer (with its mistake)
            run_cell(page, index, shots=REPORTS)
        verdict = run_cell(page, 3, "CheckFailed", shots=REPORTS)
        first = run_cell(page, 4, mistake, shots=REPORTS)
        second = run_cell(page, 5, first_step, shots=REPORTS)
        hints = page.locator(".course-hint")
        numbers = [hints.nth(i).get_attribute("data-hint") for i in range(2)]
        cell(page, 4).scroll_into_view_if_needed()
        page.screenshot(path=str(REPORTS / f"hints-{lang}.png"))
        before = run_cell(page, 6, failing, shots=REPORTS)
        # The fix: the answer cell rewritten, run, and its test run again.
        editor = cell(page, 2).locator(".cm-content")
        editor.click()
        page.keyboard.press("Control+a")
        page.keyboard.insert_text(RIGHT)
        page.keyboard.press("Escape")
        run_cell(page, 2)
        fixed = run_cell(page, 3)
        after = run_cell(page, 6, passing, shots=REPORTS)
        cell(page, 6).scroll_into_view_if_needed()
        page.screenshot(path=str(REPORTS / f"progress-{lang}.png"))
        row = page.locator(".course-progress tr[data-exercise='softmax']").inner_text()
    assert 'check.hint("softmax")' in verdict  # the sentence after the failure
    assert numbers == ["mistake:wrong-dim", "1"], numbers
    assert mistake in first and first_step in second
    assert failing in before and named in before and "wrong-dim" not in before
    assert "CheckFailed" not in fixed, fixed
    assert passing in after and failing not in row and "\t2\t" in f"{row}\t"
    assert blocked == [], blocked
    # The record is the student's own file, and it survives the server.
    assert (work / ".course" / "progress.sqlite").is_file()
