"""course.i18n: the Chinese edition is complete, built from the English one, graded
alike, and opens in JupyterLab with Chinese menus.

* every piece a student reads (markdown cell, comment, docstring) of every English
  notebook has a finished translation, and the catalog holds nothing else;
* the Chinese notebooks differ from the English ones in those pieces only;
* one submission's answers score the same, cell by cell, in both editions;
* ``COURSE_LANG=zh course lab`` opens the Chinese notebook with zh-CN menus.
"""

import ast
import io
import json
import os
import re
import shutil
import string
import subprocess
import sys
import tokenize
import warnings
from pathlib import Path

import nbformat
import pytest
from browser import browser
from harness import autograde, fill, fixture_module, graded_cells, reference_answers
from services import free_port, serving

from course import authoring, fonts, grading, i18n
from course import catalog as catalogs
from course.checks import calls
from course.grading import settings

ASSIGNMENTS = grading.assignments()
ZH = i18n.edition_root(grading.ROOT, "zh")
REPORTS = grading.ROOT / "reports" / "zh"
CHINESE = re.compile(r"[\u4e00-\u9fff]")


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
    committed = catalogs.read_catalog(i18n.catalog_path("zh"))
    unfinished = [m.id[:60] for m in committed if m.id and (m.fuzzy or not m.string)]
    assert unfinished == [], "translate these in notebooks.po"
    fresh = catalogs.update_catalog(
        english, tmp_path / "notebooks.po"
    )  # empty: all new
    keys = {(m.context, m.id) for m in committed if m.id}
    assert keys == {(m.context, m.id) for m in fresh if m.id}, (
        "run `python -m course.authoring --catalog`"
    )
    table = catalogs.translations(committed)
    for context, nb in english.items():
        assert catalogs.translate(nb, context, table) == [], context


def test_a_changed_cell_is_caught(tmp_path):
    nb = authoring.build(authoring.sources()[0])
    path = tmp_path / "notebooks.po"
    shutil.copy(i18n.catalog_path("zh"), path)
    first = next(c for c in nb.cells if c.cell_type == "markdown")
    first.source += "\nOne more sentence."
    catalog = catalogs.update_catalog({authoring.sources()[0].stem: nb}, path)
    assert catalogs.translate(
        nb, authoring.sources()[0].stem, catalogs.translations(catalog)
    )


def _code_tokens(source: str) -> list[str]:
    """The code of a cell without its comments, docstrings and labels."""
    toks = tokenize.generate_tokens(io.StringIO(source).readline)
    labels = catalogs.label_strings(source)
    return [
        t.string
        for t in toks
        if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE)
        and not (t.type == tokenize.STRING and t.string.startswith('"""'))
        and t.start not in labels
    ]


def test_labels_in_code_are_translated_and_keep_their_fields():
    """Plot titles and printed labels are catalog pieces; model inputs are not."""
    code = (
        'ax.set(xlabel="in feature (column)", title=f"lag {n}")\n'
        'print("row sums:", x, f"{a:.2f} MiB")\n'
        'for ax, title in [(axes[0], "rows sum to 1")]:\n'
        "    ax.set_title(title)\n"
        'label = "with positions" if use else "without"\n'
        'batch = tokenizer([text, "A short one."], padding=True)\n'
        'print(out["last_hidden_state"], cmap="viridis")\n'
    )
    found = [text for _, _, text in catalogs.pieces(code, "code")]
    assert found == [
        "in feature (column)",
        "lag {n}",
        "row sums:",
        "{a:.2f} MiB",
        "rows sum to 1",
        "with positions",
        "without",
    ]
    catalog = catalogs.read_catalog(i18n.catalog_path("zh"))
    table, labels = catalogs.translations(catalog), 0
    for py in authoring.sources():
        for cell in authoring.build(py).cells:
            for start, _, text in catalogs.pieces(cell.source, cell.cell_type):
                before = cell.source[max(0, start - 3) : start]
                if cell.cell_type != "code" or before[-1:] not in "\"'":
                    continue  # markdown, a comment
                if before == '"""':
                    continue  # a docstring
                labels += 1
                zh = table[(py.stem, text)]
                fields = [re.findall(r"\{[^{}]*\}", t) for t in (text, zh)]
                assert fields[0] == fields[1] and zh != text, (text, zh)
    assert labels >= 60


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_chinese_notebook_differs_only_in_what_is_read(assignment):
    en = nbformat.read(grading.notebook_path(grading.ROOT, "source", assignment), 4)
    zh = nbformat.read(grading.notebook_path(ZH, "source", assignment), 4)
    assert [c.id for c in zh.cells] == [c.id for c in en.cells]
    for a, b in zip(en.cells, zh.cells, strict=True):
        assert a.metadata == b.metadata and a.cell_type == b.cell_type, a.id
        if a.cell_type == "code":
            assert _code_tokens(a.source) == _code_tokens(b.source), a.id
        if catalogs.pieces(a.source, a.cell_type):
            assert a.source != b.source, f"{a.id} is English in the Chinese edition"


def _fields(message: str) -> list:
    """The ``{name!conversion:spec}`` fields of a message template."""
    return sorted(
        (f, c, spec) for _, f, spec, c in string.Formatter().parse(message) if f
    )


def test_every_verdict_has_a_chinese_translation():
    """Each sentence the checks and the grader mark (``say``, ``fail``, ``N_``) has
    a finished translation with the same fields; the catalog holds nothing else,
    and ``verdicts.mo`` is compiled from it."""
    marked = {m.id for m in catalogs.verdict_template() if m.id}
    path = i18n.catalog_path("zh", "verdicts")
    catalog = catalogs.read_catalog(path)
    done = {m.id: m.string for m in catalog if m.id and m.string and not m.fuzzy}
    assert len(marked) > 200
    assert sorted(marked - set(done)) == [], "run python -m course.authoring --catalog"
    assert sorted({m.id for m in catalog if m.id} - marked) == []
    assert [e for e, z in done.items() if _fields(e) != _fields(z)] == []
    assert catalogs.compile_catalog(catalog) == path.with_suffix(".mo").read_bytes()


def _prose_outside_the_catalog(path: Path, fstrings: bool = False) -> list[str]:
    """String literals with words in ``path`` that no ``say``/``fail``/``N_`` marks
    (docstrings, regular expressions and torch's own English error fragments
    aside). With ``fstrings``, an f-string with any word counts: one word around
    a field (``f"imports {name}"``) is a sentence a translator never sees."""
    tree = ast.parse(path.read_text())
    marked, docs = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in MARKS:
            marked |= {id(n) for a in node.args[:1] for n in ast.walk(a)}
            keys = [k.value for k in node.keywords if k.arg == "mistake"]
            marked |= {id(k) for k in keys}  # a misconception's key, not prose
        if isinstance(node, ast.Call) and getattr(node.func, "value", None):
            if getattr(node.func.value, "id", "") == "re":  # a pattern
                marked |= {id(n) for a in node.args[:1] for n in ast.walk(a)}
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            docs.add(id(body[0].value))
    found = []
    for node in ast.walk(tree):
        if id(node) in marked | docs:
            continue
        text = node.value if isinstance(node, ast.Constant) else None
        prose = PROSE
        if isinstance(node, ast.JoinedStr):
            marked |= {id(n) for n in ast.walk(node)}
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
            prose = WORD if fstrings else PROSE
        if (
            isinstance(text, str)
            and prose.search(text)
            and text not in ENGLISH_KEYS
            and not CODE.fullmatch(text)
            and not DOTTED.fullmatch(text)
            and not OPTION.fullmatch(text)
            and not MARKER.fullmatch(text)
        ):
            found.append(f"{path.name}:{node.lineno}: {text[:60]}")
    return found


MARKS = {"say", "fail", "N_"}
CODE = re.compile(r"[\w.]+\(.*\)")  # a call, e.g. the name of what is checked
DOTTED = re.compile(r"\w+(\.\w+)+")  # a module, e.g. torch.utils.cpp_extension
OPTION = re.compile(r"--[\w.-]+(=\S*)?")  # a command-line option, e.g. --force
MARKER = re.compile(r"[a-z0-9]+(-[a-z0-9]+)+")  # an id, e.g. course-hint-charge
PROSE = re.compile(
    r"[A-Za-z]{2,}\W+[A-Za-z]{2,}\W+[A-Za-z]{2,}"  # a sentence
    r"|^[A-Za-z]+(?:'s)? [A-Za-z' ]*[A-Za-z]$"  # or a phrase: "a BERT layer"
)
WORD = re.compile(r"(?<![\w.])[A-Za-z]{3,}(?![\w.(])")  # a word, not a name
#: The keys of the raised-error hints: fragments of torch's messages, in English.
ENGLISH_KEYS = set(calls.HINTS)
#: Modules of course/grading that write no sentence a student reads (each covered
#: module's f-strings count too: there a verdict is often a verb and a name).
NOT_STUDENT_FACING = {
    "__init__.py": "nbgrader's command lines and config",
    "batch.py": "the grade command's report to the instructor",
    "results.py": "the grade command's report to the instructor",
    "cells.py": "nbgrader's markers, grade ids and folders",
    "environment.py": "the grading processes' variables",
    "flags.py": "the grade command's report to the instructor",
    "runs.py": "nbgrader's command lines",
    "settings.py": "nbgrader's traits and the editions' course ids",
    "contain.py": "the sandbox: paths and logs",
    "procs.py": "the sandbox: /proc paths",
    "engine.py": "the sandbox: command lines and logs",
    "cluster.py": "the grade command's dask cluster: settings and plugin names",
    "execute.py": "trait help and logs (what a cell says goes through say)",
    "feedback_page.py": "nbgrader's template labels, matched to be translated",
    "gradebook.py": "instructor commands' errors",
    "hintcharge.py": "the grade command's report to the instructor",
    "exchange.py": "nbgrader collect's log, for the instructor",
    "inert.py": "HTML tags, attributes and MIME types",
    "nbgrader_app.py": "nbgrader's command line",
    "hintservice.py": "SQL and routes; its sentences are tell's (hints.po), each "
    "one translated (test_hints)",
    "judge.py": "trait help and patterns",
    "kernels.py": "the grader's kernel client: jupyter_client's errors, in its log",
    "lockdown.py": "the sandbox: system call names and the machine's errors",
    "mounts.py": "the sandbox: paths and the machine's errors",
    "report.py": "the instructor's report: HTML and font names",
    "sandbox.py": "the sandbox: paths, variables and the machine's errors",
    "warm.py": "the sandbox: module names",
    "zygote.py": "the sandbox: command lines",
}


def test_no_verdict_is_written_outside_the_catalog():
    """A sentence added to a check, or to the grader's reading of answers
    (shortcuts, tampering), without ``say``/``fail``/``N_`` would speak English
    only: none is. (A template with fields, not an f-string, is what is marked.)"""
    checks = Path(i18n.HERE) / "checks"
    found = [
        line
        for path in sorted(checks.glob("*.py"))
        if path.name not in ("evidence.py", "codec.py")  # the record format
        for line in _prose_outside_the_catalog(path)
    ]
    scan = sorted((Path(i18n.HERE) / "grading" / "steps" / "scan").glob("*.py"))
    grading = sorted(set((Path(i18n.HERE) / "grading").rglob("*.py")) - set(scan))
    covered = [p for p in grading if p.name not in NOT_STUDENT_FACING]
    covered += [p for p in scan if p.name != "deny.py"]  # why each entry, for code
    covered += [Path(i18n.HERE) / "lab.py"]  # JupyterLab's Check and Hint buttons
    assert {"tampering.py", "lessons.py", "reading.py"} <= {p.name for p in covered}
    found += [
        line for path in covered for line in _prose_outside_the_catalog(path, True)
    ]
    assert found == []


def test_an_empty_field_stays_empty_in_chinese(monkeypatch):
    """``gettext("")`` is the catalog's header: an empty field (no ``{where}``, no
    ``{hint}`` when a student's code raises) must not become it, and a field that
    is no catalog sentence (a student's error) is passed through as it is."""
    from course import checks

    def raises():
        raise ValueError("Project-free words of the student's own")

    monkeypatch.setenv("COURSE_LANG", "zh")
    said = i18n.say("{name} is wrong: {mistakes}", name="", mistakes="")
    assert "Project-Id-Version" not in said and CHINESE.search(said)
    assert i18n.say("{a}{b}", a="", b=" ") == " "
    with pytest.raises(checks.CheckFailed) as err:
        checks.call(raises, name="f")
    assert "Project-Id-Version" not in str(err.value), str(err.value)
    assert "Project-free words of the student's own" in str(err.value)
    assert CHINESE.search(str(err.value))


def test_the_readmes_say_what_language_the_verdicts_speak(monkeypatch):
    """README's 中文版 paragraph says verdicts come from the catalog (not that
    they are English), and they do: a check's and the grader's, in Chinese."""
    from course.checks import softmax
    from course.grading.steps.scan import scan_source

    root = Path(i18n.HERE).parent
    readme = (root / "README.md").read_text("utf-8")
    paragraph = readme.split("**中文版.**")[1].split("\n## ")[0]
    assert "verdicts.po" in paragraph and "shortcuts, tampering" in paragraph
    for text in (readme, (root / "README.zh.md").read_text("utf-8")):
        assert not re.search(r"(?i)verdicts (are|stay) (still |only )?English", text)
    monkeypatch.setenv("COURSE_LANG", "zh")
    assert CHINESE.search(i18n.say(softmax.BY_HAND))
    assert CHINESE.search(scan_source("exec('x = 1')")[0][1])


def test_a_verdict_speaks_the_language_asked_for(monkeypatch):
    """The same failure, in each language, with the same numbers in it."""
    import torch

    from course import checks

    said = {}
    for lang in ("en", "zh"):
        monkeypatch.setenv("COURSE_LANG", lang)
        with pytest.raises(checks.CheckFailed) as err:
            checks.expect_close(
                torch.zeros(2, 3),
                torch.ones(2, 3),
                "probs",
                what=checks.N_("the reference"),
            )
        said[lang] = str(err.value)
    assert said["en"].startswith("probs does not match the reference")
    assert CHINESE.search(said["zh"]) and "probs" in said["zh"]
    assert re.findall(r"\d", said["en"]) == re.findall(r"\d", said["zh"])


@pytest.mark.slow
def test_both_editions_grade_a_submission_alike(tmp_path, monkeypatch):
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
    en, en_said = autograde(
        courses["en"],
        assignment,
        {
            "en": (fill(releases["en"], answers), {}),
            "zh_notebook": (fill(releases["zh"], answers), {}),
        },
    )
    zh, zh_said = autograde(
        courses["zh"], assignment, {"zh": (fill(releases["zh"], answers), {})}
    )
    assert zh["zh"] == en["en"] == en["zh_notebook"]
    lost = [c for c, (score, top) in en["en"].items() if top and score < top]
    assert set(mistake.fails) <= set(lost), lost
    for cell in graded_cells(dict.fromkeys(lost)):  # each course's own language
        assert CHINESE.search(zh_said["zh"][cell]), zh_said["zh"][cell]
        assert not CHINESE.search(en_said["zh_notebook"][cell]), cell
        assert not CHINESE.search(en_said["en"][cell]), cell
    # Feedback pages: nbgrader's labels in each course's language too.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the zh template
    pages = {}
    for lang, student in (("en", "en"), ("zh", "zh")):
        grading.nbgrader("generate_feedback", assignment, "--force", root=courses[lang])
        html = courses[lang] / "feedback" / student / assignment / f"{assignment}.html"
        pages[lang] = html.read_text()
    assert "Score: " in pages["en"] and "得分" not in pages["en"]
    assert "得分: " in pages["zh"] and "测试单元格" in pages["zh"]
    for english in ("Score: ", "Test cell", "Student's answer", "(Top)"):
        assert english not in pages["zh"], english
    # The Chinese course's class report: Chinese text, plots with a CJK font.
    from course.grading.run import report

    monkeypatch.setenv("COURSE_LANG", "zh")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph ... missing from font(s)"
        page = report.build(
            root=courses["zh"], assignments=[assignment], out=tmp_path / "report"
        )
    text = page.read_text()
    verdict = zh_said["zh"][graded_cells(dict.fromkeys(lost))[0]]
    assert "班级报告" in text and verdict.split(": ", 1)[1][:20] in text
    # `course report --root`: each course's language, whatever COURSE_LANG says.
    for lang, title in (("zh", "班级报告"), ("en", "Class report")):
        env = {**os.environ, "COURSE_LANG": "en" if lang == "zh" else "zh"}
        cmd = [sys.executable, "-m", "course", "report", assignment]
        subprocess.run([*cmd, f"--root={courses[lang]}"], env=env, check=True)
        assert title in (courses[lang] / "reports" / "report.html").read_text()


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


@pytest.mark.slow
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
        catalogs.translations(catalogs.read_catalog(i18n.catalog_path("zh"))).values()
    )
    assert len(terms) >= 8 and [t for t in terms if t not in text] == []


def test_feedback_labels_follow_the_edition_unless_no_cache_is_writable(
    monkeypatch, tmp_path
):
    """The Chinese edition's feedback template is written to the cache; where it
    cannot be, nbgrader keeps its own (English) one and the command still runs."""
    from traitlets.config import Config

    monkeypatch.setenv("COURSE_LANG", "en")  # configure sets it
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    zh, en = Config(), Config()
    settings.configure(zh, "zh")
    settings.configure(en, "en")
    ours = tmp_path / "cache" / "attention-by-hand" / "zh"
    assert zh.HTMLExporter.extra_template_basedirs[0] == str(ours)
    assert (ours / "feedback" / "index.html.j2").is_file()
    assert "extra_template_basedirs" not in en.HTMLExporter
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))  # no folder can be made in it
    stuck = Config()
    settings.configure(stuck, "zh")
    assert stuck.CourseDirectory.course_id == settings.COURSE_IDS["zh"]
    assert "extra_template_basedirs" not in stuck.HTMLExporter


def test_the_chinese_edition_is_an_nbgrader_course_of_its_own(monkeypatch):
    """Its own course id and root, the English grading steps, and Chinese for
    nbgrader and its kernels."""
    from traitlets.config.loader import PyFileConfigLoader

    monkeypatch.setenv("COURSE_LANG", "en")  # loading the config sets it

    def load(folder: Path):
        return PyFileConfigLoader("nbgrader_config.py", path=str(folder)).load_config()

    en, zh = load(grading.ROOT), load(ZH)
    assert zh.CourseDirectory.course_id == settings.COURSE_IDS["zh"]
    assert en.CourseDirectory.course_id == settings.COURSE_IDS["en"]
    assert Path(zh.CourseDirectory.root) == ZH
    for section in ("Autograde", "GenerateFeedback", "Execute", "GuardedExecute"):
        assert zh[section] == en[section], section
    assert os.environ["COURSE_LANG"] == "zh"


@pytest.mark.slow
def test_course_check_speaks_the_editions_language(tmp_path):
    """``COURSE_LANG=zh course check`` grades in the Chinese course: its verdicts
    and its total line are Chinese."""
    assignment = "05_softmax_and_scaling"
    notebook = tmp_path / f"{assignment}.ipynb"
    shutil.copy(grading.notebook_path(ZH, "release", assignment), notebook)
    proc = subprocess.run(
        [sys.executable, "-m", "course", "check", str(notebook)],
        env={**os.environ, "COURSE_LANG": "zh"},
        cwd=grading.ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr  # nothing answered yet
    assert "还没有实现" in proc.stdout and "总分（自动评分）" in proc.stdout, (
        proc.stdout
    )


FONT_PROBE = """
import warnings
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import course
fig, ax = plt.subplots()
ax.set(title="输入特征（列）", xlabel="位置")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    fig.canvas.draw()
print(plt.rcParams["font.sans-serif"][0])
print(sum("missing from font" in str(w.message) for w in caught))
"""


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_chinese_plots_use_a_cjk_font_and_english_ones_are_unchanged(lang):
    """A notebook imports pyplot, then the course: in Chinese, labels draw."""
    env = {**os.environ, "COURSE_LANG": lang}
    out = subprocess.run(
        [sys.executable, "-c", FONT_PROBE],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout.splitlines()
    if lang == "zh":
        assert out == ["WenQuanYi Micro Hei", "0"], out
    else:
        assert out[0] not in fonts.CJK_FONTS and out[1] != "0", out
    # one home for the rule: the class report uses the same function
    report = (grading.ROOT / "course" / "grading" / "run" / "report.py").read_text()
    assert "from ...fonts import use_cjk_fonts" in report
    assert "CJK_FONTS" not in report


# One Chinese term per concept: each variant on the left was replaced by the term on
# the right (README.zh.md's glossary), or is a literal metaphor of the English.
VARIANTS = {
    "回显任务": "复述任务",
    "书面作答": "书面回答",
    "文字作答": "书面回答",
    "词元类型": "片段",
    "片段类型": "片段",
    "留出数据": "留出集",
    "切分": "拆分",
    "批次": "批",
    "批大小": "批量大小",
    "层归一化": "层规范化",
    "跟随": "关注",
    "看向": "关注",
    "住在": "对应",
    "大头": "单头",
    "相遇": "点积",
    "停平了": "不再下降",
    "框成": "首尾加上",
    "一块行": "行块",
    "子词": "词片",
    "掩去": "屏蔽",
    "被掩码": "被屏蔽",
    "滚动": "累计",
    "关闭的捷径": "已被禁用",
    "看得远": "关注远处",
    "小小的": "小型",
    "往前 3 步": "3 个位置之前",
    "单位正态": "标准正态",
    "滑动最大值": "累计最大值",  # a running max; 滑动 is a sliding window's
    "滑动的最大值": "累计最大值",
    "滑动和": "累计和",
    "遮挡": "屏蔽",
    "头大小": "头维度",
    "隐藏层大小": "隐藏维度",
    "手算": "亲手",  # by hand: the course title and every notebook say 亲手
    "套上": "经过",
    "上下文向量": "上下文",
    "中间层大小": "中间维度",
    "批量维": "批维度",
    "能表示的最小数": "能表示的最小值",
    "叠加多个": "堆叠多个",  # stacked layers; 叠加 reads as added together
    "重塑": "变形",  # reshape, as every other line says
}
_CODE = re.compile(r"```[\s\S]*?```|`[^`\n]*`|\$\$[\s\S]*?\$\$|\$[^$\n]*\$")
_HAN = "\u4e00-\u9fff"


def _chinese_pieces() -> list[tuple[str, str, str]]:
    """``(catalog, msgid, msgstr)`` of every catalog's translations."""
    return [
        (domain, m.id, m.string)
        for domain in ("notebooks", "verdicts", "hints", "hinttexts")
        for m in catalogs.read_catalog(i18n.catalog_path("zh", domain))
        if m.id and m.string
    ]


def test_one_chinese_term_per_concept_and_full_width_punctuation():
    problems = []
    for domain, msgid, text in _chinese_pieces():
        where = f"{domain}: {msgid[:50]!r}"
        problems += [
            f"{where}: {v} (say {t})" for v, t in VARIANTS.items() if v in text
        ]
        if re.search(rf"\*\*[^*\n]*[{_HAN}][^*\n]*\.\*\*", text):
            problems.append(f"{where}: a bold label ends in an ASCII full stop")
        prose = _CODE.sub(" ", text)
        for found in re.finditer(rf"[{_HAN}）”][,;:?!]|[{_HAN}]\.(?=\s|$)", prose):
            problems.append(f"{where}: ASCII punctuation {found.group()!r}")
        if re.search(f"[{_HAN}]", prose) and '"' in prose:
            problems.append(f"{where}: straight quotes in Chinese text")
    assert problems == [], "\n".join(problems)


def test_each_notebook_glosses_token_at_first_use_and_06_bridges_to_d2l():
    table = catalogs.translations(catalogs.read_catalog(i18n.catalog_path("zh")))
    glossed = 0
    for py in authoring.sources():
        markdown = [
            table[(py.stem, c.source)]
            for c in authoring.build(py).cells
            if c.cell_type == "markdown" and catalogs.pieces(c.source, "markdown")
        ]
        text = "\n".join(markdown)
        if "词元" in text:
            first = text.index("词元")
            assert text[first:].startswith("词元（token）"), py.stem
            glossed += 1
    assert glossed >= 9
    bridge = "\n".join(v for (c, _), v in table.items() if c == "06_manual_attention")
    assert "注意力汇聚" in bridge and "掩蔽 softmax" in bridge


def test_sentences_follow_full_width_punctuation_at_once_and_others_after_a_space():
    assert i18n.sentences("Try again.", None, "It costs 1.") == "Try again. It costs 1."
    assert i18n.sentences("再试一次。", "", "扣 1 分。") == "再试一次。扣 1 分。"
    assert i18n.sentences(None, "一句。") == "一句。"


_FULL = "，。：；！？、）」』”"
#: A line break in Chinese prose that markdown draws as a space: after full-width
#: punctuation, between two Han characters, or before an opening full-width
#: bracket (not before a list item, heading, table row, quote, marker line or blank
#: line).
_SOFT_BREAK = re.compile(
    rf"(?:(?<=[{_FULL}])\n|(?<=[{_HAN}])\n(?=[ \t]*[{_HAN}])|\n(?=[ \t]*（))"
    r"(?![ \t]*(?:[-*+] |\d+\. |#|\n|\||>|=|<))"
)
_BOLD_COLON = re.compile(r"\*\*[^*\n]*[：:]\*\*")
_ITALIC_HAN = re.compile(
    rf"(?<![*A-Za-z0-9_])\*(?![*\s])[^*\n]*[{_HAN}][^*\n]*?(?<!\s)\*(?![*A-Za-z0-9_])"
)
_HAN_SPACE_HAN = re.compile(rf"[{_HAN}] +[{_HAN}]")
_GLOSSED = {"pre-LN": "前置层规范化", "post-LN": "后置层规范化"}
#: A rubric point or model answer whose label's colon is followed, in the same
#: clause, by a second colon ("1 分：影响：不缩放……"): a chain a reader cannot parse.
_LABEL = re.compile(r"^[ \t]*(?:\* [\d.]+ 分：|\*\*参考答案\*\*：)(.*)$", re.M)


def _colon_chains(outside_code: str) -> list[str]:
    found = []
    for m in _LABEL.finditer(outside_code):
        clause = re.split(r"[。；？！]", re.sub(r"（[^）]*）", "", m.group(1)))[0]
        if "：" in clause:
            found.append(f"two colons in a label's clause: {m.group()[:40]!r}")
    return found


def _typography(text: str) -> list[str]:
    """What d2l-zh's typography would not print in one Chinese piece."""
    prose = re.sub(r"```[\s\S]*?```|\$\$[\s\S]*?\$\$", " ", text)
    found = [f"a soft line break: {prose[m.start() - 8 : m.end() + 8]!r}"
             for m in _SOFT_BREAK.finditer(prose)]  # fmt: skip
    found += [
        f"a colon inside bold: {m.group()!r}" for m in _BOLD_COLON.finditer(prose)
    ]
    found += [f"italic Chinese: {m.group()!r}" for m in _ITALIC_HAN.finditer(prose)]
    outside_code = re.sub(r"`[^`]*`", "`", prose)
    found += [
        f"a space between Han characters: {m.group()!r}"
        for m in _HAN_SPACE_HAN.finditer(outside_code)
    ]
    found += [
        f"{term} without {gloss}"
        for term, gloss in _GLOSSED.items()
        if term in outside_code and gloss not in outside_code
    ]
    return found + _colon_chains(outside_code)


def test_chinese_typography_follows_d2l_zh():
    """Every Chinese piece of every catalog: no soft line break that draws as a
    space, no colon inside a bold label, no italic Chinese, no space between Han
    characters, pre-LN and post-LN glossed where they are used, no rubric point
    or model answer chaining two colons."""
    problems = [
        f"{domain}: {msgid[:40]!r}: {problem}"
        for domain, msgid, text in _chinese_pieces()
        for problem in _typography(text)
    ]
    assert problems == [], "\n".join(problems)


def test_the_typography_rules_find_what_they_name():
    """The control: each rule finds the review's own examples."""
    assert _typography("BERT（MiniLM：\n6 层）")[0].startswith("a soft line break")
    assert _typography("一个 head\n（头）")[0].startswith("a soft line break")
    assert _typography("注意\n力")[0].startswith("a soft line break")
    assert _typography("**诊断：** 看这里")[0].startswith("a colon inside bold")
    assert _typography("它的*列*")[0].startswith("italic Chinese")
    assert _typography("热力图 含有")[0].startswith("a space between Han")
    assert _typography("BERT 是 post-LN") == ["post-LN without 后置层规范化"]
    assert _typography("* 1 分：影响：不缩放则饱和。")[0].startswith("two colons")
    assert _typography("* 1 分：两者（学习式：拟合；正弦：无参数）。") == []
    assert _typography("第 h 个头是特征的\n`h*d`，见下。\n\n* 列表") == []


def test_a_chinese_field_leaves_no_space_between_han_characters(monkeypatch):
    monkeypatch.setenv("COURSE_LANG", "zh")
    image = i18n.say("the heatmap's image")
    said = i18n.say("{name} contains NaN or inf.", name=image)
    assert said.startswith(image + "含有"), said
    named = i18n.say("{name} contains NaN or inf.", name="probs")
    assert named.startswith("probs 含有"), named  # a code name keeps its space


#: A filled-in verdict as a student reads it: no space beside full-width
#: punctuation or between Han characters, one between Han and Latin or digits.
_RENDERED = re.compile(
    rf"[{_FULL}（“] +| +[{_FULL}（“]|[{_HAN}] +[{_HAN}]"
    rf"|[{_HAN}][A-Za-z0-9]|[A-Za-z0-9][{_HAN}]"
)


def _filled(template: str, value: str) -> dict[str, object]:
    """Every field of ``template`` filled with ``value`` (a number where the field
    formats one, ``{acc:.2f}``)."""
    return {
        field: 3.0 if spec else value
        for _, field, spec, _ in string.Formatter().parse(template)
        if field
    }


@pytest.mark.parametrize("value", ["a BERT of another size", "probs", "3"])
def test_every_verdict_filled_in_is_spaced_as_d2l_zh(monkeypatch, value):
    """Every verdict of the catalog, its fields filled with a Chinese phrase, a
    code name or a number, and joined with a hint (compare.with_hint)."""
    from course.checks.compare import with_hint

    monkeypatch.setenv("COURSE_LANG", "zh")
    problems = []
    for m in catalogs.read_catalog(i18n.catalog_path("zh", "verdicts")):
        if not (m.id and m.string and isinstance(m.id, str)):
            continue
        try:
            text = with_hint(i18n.say(m.id, **_filled(m.id, value)), "One head.")
        except (KeyError, IndexError, ValueError):
            continue  # a field with a format spec or index: not a plain sentence
        outside_code = re.sub(r"`[^`]*`", "`", text)
        problems += [
            f"{m.id[:50]!r}: {found.group()!r} in {text[:80]!r}"
            for found in _RENDERED.finditer(outside_code)
        ]
    assert problems == [], "\n".join(problems)


def test_the_filled_in_rule_finds_what_it_names():
    """The control: each spacing slip the review found, in a rendered verdict."""
    for slip in ("变成 0。 或者：", "第 5 行） 提示：", "BERT上", "含有 热力图", "头9"):
        assert _RENDERED.search(slip), slip
    assert not _RENDERED.search("在另一种尺寸的 BERT 上，probs 的形状应为 (1, 2)。")
