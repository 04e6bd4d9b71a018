"""course.i18n: the Chinese edition is complete, built from the English one, graded
alike, and opens in JupyterLab with Chinese menus.

* every piece a student reads (markdown cell, comment, docstring) of every English
  notebook has a finished translation, and the catalog holds nothing else;
* the Chinese notebooks differ from the English ones in those pieces only;
* one submission's answers score the same, cell by cell, in both editions;
* ``COURSE_LANG=zh course lab`` opens the Chinese notebook with zh-CN menus.
"""

import io
import json
import os
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import nbformat
import pytest
from browser import browser
from harness import autograde, fill, fixture_module, reference_answers
from services import free_port, serving

from course import authoring, grading, i18n

ASSIGNMENTS = grading.assignments()
ZH = i18n.edition_root(grading.ROOT, "zh")
REPORTS = grading.ROOT / "reports" / "zh"


@pytest.mark.parametrize(
    ("value", "lang"),
    [(None, "en"), ("zh", "zh"), ("zh_CN", "zh"), ("zh-CN.UTF-8", "zh"), ("en", "en")],
)
def test_course_lang_picks_the_language(monkeypatch, value, lang):
    monkeypatch.delenv("COURSE_LANG", raising=False)
    if value:
        monkeypatch.setenv("COURSE_LANG", value)
    assert i18n.language() == lang


def test_an_unknown_language_is_one_sentence():
    with pytest.raises(ValueError, match="speaks en and zh"):
        i18n.language("fr")


def test_every_piece_has_a_translation_and_the_catalog_nothing_else(tmp_path):
    """A changed English cell leaves its translation fuzzy and a new one leaves it
    empty: either fails here, so no cell exists in one language only."""
    english = {py.stem: authoring.build(py) for py in authoring.sources()}
    committed = i18n.read_catalog(i18n.catalog_path("zh"))
    unfinished = [m.id[:60] for m in committed if m.id and (m.fuzzy or not m.string)]
    assert unfinished == [], "translate these in notebooks.po"
    fresh = i18n.update_catalog(english, tmp_path / "notebooks.po")  # empty: all new
    keys = {(m.context, m.id) for m in committed if m.id}
    assert keys == {(m.context, m.id) for m in fresh if m.id}, (
        "run `python -m course.authoring --catalog`"
    )
    table = i18n.translations(committed)
    for context, nb in english.items():
        assert i18n.translate(nb, context, table) == [], context


def test_a_changed_cell_is_caught(tmp_path):
    nb = authoring.build(authoring.sources()[0])
    path = tmp_path / "notebooks.po"
    shutil.copy(i18n.catalog_path("zh"), path)
    first = next(c for c in nb.cells if c.cell_type == "markdown")
    first.source += "\nOne more sentence."
    catalog = i18n.update_catalog({authoring.sources()[0].stem: nb}, path)
    assert i18n.translate(nb, authoring.sources()[0].stem, i18n.translations(catalog))


def _code_tokens(source: str) -> list[str]:
    """The code of a cell without its comments and docstrings."""
    toks = tokenize.generate_tokens(io.StringIO(source).readline)
    return [
        t.string
        for t in toks
        if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE)
        and not (t.type == tokenize.STRING and t.string.startswith('"""'))
    ]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_chinese_notebook_differs_only_in_what_is_read(assignment):
    en = nbformat.read(grading.notebook_path(grading.ROOT, "source", assignment), 4)
    zh = nbformat.read(grading.notebook_path(ZH, "source", assignment), 4)
    assert [c.id for c in zh.cells] == [c.id for c in en.cells]
    for a, b in zip(en.cells, zh.cells, strict=True):
        assert a.metadata == b.metadata and a.cell_type == b.cell_type, a.id
        if a.cell_type == "code":
            assert _code_tokens(a.source) == _code_tokens(b.source), a.id
        if i18n.pieces(a.source, a.cell_type):
            assert a.source != b.source, f"{a.id} is English in the Chinese edition"


def test_both_editions_grade_a_submission_alike(tmp_path):
    """The same answers (one exercise wrong), submitted from each edition, get the
    same score in every cell; a Chinese notebook graded by the English course too."""
    assignment = "05_softmax_and_scaling"
    courses = {
        lang: grading.make_course(tmp_path / lang, lang=lang) for lang in ("en", "zh")
    }
    releases = {}
    for lang, root in courses.items():
        grading.release([assignment], root)
        path = grading.notebook_path(root, "release", assignment)
        releases[lang] = json.loads(path.read_text())
    mistake = fixture_module(assignment).MUTANTS[2]  # softmax over dim 0
    answers = {
        **reference_answers(courses["en"], assignment),
        mistake.cell: mistake.code,
    }
    en, _ = autograde(
        courses["en"],
        assignment,
        {
            "en": (fill(releases["en"], answers), {}),
            "zh_notebook": (fill(releases["zh"], answers), {}),
        },
    )
    zh, _ = autograde(
        courses["zh"], assignment, {"zh": (fill(releases["zh"], answers), {})}
    )
    assert zh["zh"] == en["en"] == en["zh_notebook"]
    lost = [c for c, (score, top) in en["en"].items() if top and score < top]
    assert set(mistake.fails) <= set(lost), lost


@pytest.fixture
def chinese_lab(tmp_path):
    """``COURSE_LANG=zh course lab`` on a copy of the Chinese edition."""
    root = tmp_path / "course"
    for folder in ("source", "release"):
        shutil.copytree(ZH / folder, root / "zh" / folder)
    shutil.copytree(grading.ROOT / "hub" / "student", root / "hub" / "student")
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "course",
        "lab",
        f"--root={root}",
        "--",
        "--no-browser",
    ]
    cmd += ["--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}"]
    cmd += ["--ServerApp.port_retries=0", "--IdentityProvider.token="]
    cmd += [f"--LabApp.user_settings_dir={tmp_path / 'settings'}"]
    cmd += [f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}"]
    env = {**os.environ, "COURSE_LANG": "zh"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    url = f"http://127.0.0.1:{port}"
    with serving(cmd, probe=f"{url}/api/status", log=tmp_path / "lab.log", env=env):
        yield url, root


def test_chinese_notebook_opens_with_chinese_menus(chinese_lab):
    url, root = chinese_lab
    assignment = "05_softmax_and_scaling"
    assert (root / "mywork-zh" / assignment / f"{assignment}.ipynb").is_file()
    REPORTS.mkdir(parents=True, exist_ok=True)
    with browser() as (ctx, blocked):
        page = ctx.new_page()
        page.goto(f"{url}/lab/tree/{assignment}/{assignment}.ipynb")
        page.wait_for_selector(".jp-Notebook", timeout=60000)
        page.wait_for_selector(
            ".jp-RenderedMarkdown h1:has-text('Softmax 与缩放')", timeout=60000
        )
        page.wait_for_selector(".jp-RenderedMarkdown mjx-container", timeout=60000)
        menus = page.locator(".lm-MenuBar-itemLabel").all_inner_texts()
        page.screenshot(path=str(REPORTS / "lab-zh.png"))
    assert "文件" in menus and "编辑" in menus, menus
    assert blocked == [], blocked
    fonts = subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True)
    assert fonts.stdout.strip(), "no Chinese font: the page draws boxes (make browser)"


def test_the_glossary_is_what_the_notebooks_say():
    """Each Chinese term of README.zh.md's glossary is used in the translations."""
    readme = (grading.ROOT / "README.zh.md").read_text("utf-8")
    table = readme.split("## 术语表", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in table.splitlines() if line.startswith("|")][2:]
    rows = [line.split("|")[1].strip() for line in lines]  # under the header
    terms = [t.strip() for row in rows for t in row.split("/")]
    text = "\n".join(
        i18n.translations(i18n.read_catalog(i18n.catalog_path("zh"))).values()
    )
    assert len(terms) >= 8 and [t for t in terms if t not in text] == []


def test_the_chinese_edition_is_an_nbgrader_course_of_its_own():
    from traitlets.config.loader import PyFileConfigLoader

    def load(folder: Path):
        return PyFileConfigLoader("nbgrader_config.py", path=str(folder)).load_config()

    en, zh = load(grading.ROOT), load(ZH)
    assert zh.CourseDirectory.course_id == i18n.COURSE_IDS["zh"]
    assert en.CourseDirectory.course_id == i18n.COURSE_IDS["en"]
    assert Path(zh.CourseDirectory.root) == ZH
    for section in ("Autograde", "GenerateFeedback", "Execute", "GuardedExecute"):
        assert zh[section] == en[section], section
