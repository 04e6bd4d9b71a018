"""course.grading.steps.inert: a student's notebook runs nothing where it is shown.

formgrader's submission page and the feedback page are nbconvert HTML of a
student's notebook, opened with their reader's Jupyter session. The notebook here
holds what a student could try (HTML in markdown, links, frames, styles that load
a URL, ``base``, ``meta``, objects, outputs of every active type, an image size
that adds an attribute); each payload sets a marker (``window.__pwned``, the
page's title) and asks this test's loopback server for ``/pwned-<name>``. It is
rendered (a) by the exporter that formgrader builds, from the course's
configuration as the hub's instructor server loads it, and (b) by ``nbgrader
generate_feedback`` in a course folder, then opened in Chromium from that server,
which also serves formgrader's scripts, a stub of its grades API, and MathJax where
a Jupyter server has it. No marker, no request; the page still shows the student's
words, a typeset formula, PNG images, a table and code, and formgrader's score and
comment boxes still work. The control: the same notebook with the defence off (it
fires) and with nbconvert's sanitising alone (the course's steps are needed).
"""

import base64
import copy
import io
import json
import mimetypes
import os
import sys
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import nbclassic
import nbformat
import pytest
from browser import browser
from nbconvert import HTMLExporter
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from nbgrader.server_extensions.formgrader import handlers
from nbgrader.server_extensions.formgrader.formgrader import FormgradeExtension

from course import grading
from course.grading import settings
from course.grading.steps import inert

ROOT = grading.ROOT
ASSIGNMENT = NOTEBOOK = "inert"
STUDENT = "ana"
GRADE_ID = "written"  # the written answer's score and comment boxes
SUBMISSION = "submission-1"
WORDS = "Attention weighs the values by how well each query matches each key."
STATIC = {  # what a Jupyter server with formgrader serves below these
    "/formgrader/static/": Path(handlers.static_path),
    "/static/components/": Path(nbclassic.__file__).parent / "static" / "components",
}
GRADES = [
    {
        "id": "g-written",
        "name": GRADE_ID,
        "auto_score": None,
        "manual_score": 1.5,
        "max_score": 2.0,
        "extra_credit": None,
        "needs_manual_grade": True,
    }
]
COMMENTS = [
    {
        "id": "c-written",
        "name": GRADE_ID,
        "auto_comment": None,
        "manual_comment": "Looks right.",
    }
]
# Payloads that fire in Chromium with no defence (the others are inert in
# nbconvert's templates anyway: an SVG output is drawn as an <img>, widget and
# Vega outputs as nothing).
LIVE = {
    "md-script", "md-img", "md-svg", "md-link", "md-mdlink", "md-files-link",
    "md-iframe",
    "md-details", "md-base", "md-meta", "md-import", "md-background",
    "md-stylesheet", "md-object", "md-embed", "html-script", "html-onerror",
    "js", "plotly", "markdown-out", "png-size",
}  # fmt: skip
# The payloads that run a script (the others load a URL): they set a marker too.
SCRIPTS = LIVE - {
    "md-base", "md-meta", "md-import", "md-background", "md-stylesheet",
    "md-object", "md-embed",
}  # fmt: skip
# What nbconvert's sanitize_html alone lets through: markdown cells (nbgrader's
# templates do not clean them) and an image's size (no template quotes it).
PAST_NBCONVERT = {name for name in LIVE if name.startswith("md-")} | {"png-size"}


def _script(base: str, name: str) -> str:
    """JavaScript that marks the page and asks ``base`` for ``/pwned-<name>``; no
    space or double quote, so it runs in any attribute, quoted or not."""
    return (
        f"top.__pwned=(top.__pwned||[]).concat('{name}');"
        f"top.document.title='pwned-{name}';"
        f"fetch('{base}/pwned-{name}',{{mode:'no-cors'}})"
    )


def _markdown_payloads(base: str) -> list[str]:
    """Markdown cells, one payload each."""

    def s(name):
        return _script(base, name)

    return [
        f"<script>{s('md-script')}</script>",
        f'<img src="x" onerror="{s("md-img")}">',
        f'<svg onload="{s("md-svg")}"></svg>',
        f'Click <a href="javascript:{s("md-link")}">read more</a>.',
        f"Click [see the proof](<javascript:{s('md-mdlink')}>).",
        # nbgrader's templates strip "files/" from a cell's links after cleaning
        f"Click [the files](files/javascript:{s('md-files-link')}).",
        f'<iframe srcdoc="<script>{s("md-iframe")}</script>"></iframe>',
        f'<details open ontoggle="{s("md-details")}"><summary>more</summary></details>',
        f"<style>@import url({base}/pwned-md-import);</style>",
        f'<div style="background-image:url({base}/pwned-md-background)">box</div>',
        f'<link rel="stylesheet" href="{base}/pwned-md-stylesheet">',
        f'<object data="{base}/pwned-md-object" width="20" height="20"></object>',
        f'<embed src="{base}/pwned-md-embed" width="20" height="20">',
        # A heading whose id is a grade id: formgrader's script would bind the
        # written answer's score box to it.
        f"## {GRADE_ID}",
        f'<base href="{base}/pwned-md-base/"><img src="probe.png">',
        f'<meta http-equiv="refresh" content="1;url={base}/pwned-md-meta">',
    ]


def _outputs(base: str) -> list:
    """One output of each active type, each a payload."""

    def s(name):
        return _script(base, name)

    def out(data, metadata=None):
        return new_output("display_data", data=data, metadata=metadata or {})

    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" onload="{}"><script>{}</script></svg>'
    )
    return [
        out(
            {
                "text/html": f"<script>{s('html-script')}</script><b>bold output</b>"
                f'<img src="x" onerror="{s("html-onerror")}">',
                "text/plain": "<HTML>",
            }
        ),
        out({"application/javascript": s("js"), "text/plain": "<JS>"}),
        out({"image/svg+xml": svg.format(s("svg-output"), s("svg-output"))}),
        out(
            {
                "application/vnd.jupyter.widget-view+json": {
                    "model_id": f"</script><script>{s('widget')}</script>",
                    "version_major": 2,
                    "version_minor": 0,
                },
                "text/plain": "<widget>",
            }
        ),
        out(
            {
                "application/vnd.vegalite.v5+json": {
                    "mark": "point",
                    "description": f'<img src="x" onerror="{s("vega")}">',
                },
                "text/plain": "<VegaLite>",
            }
        ),
        out(
            {
                "application/vnd.plotly.v1+json": {"data": [], "layout": {}},
                "text/html": f"<div>plot</div><script>{s('plotly')}</script>",
            }
        ),
        out({"text/markdown": f'**bold** <img src="x" onerror="{s("markdown-out")}">'}),
        out(  # not a PNG: its onerror (the size's) fires where it is kept
            {"image/png": base64.b64encode(b"not a png").decode()},
            {"image/png": {"width": f"1 onerror={s('png-size')}"}},
        ),
    ]


def _heatmap() -> str:
    """A matplotlib heatmap, as a notebook's PNG output holds it (base64)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.imshow(np.random.default_rng(0).random((4, 4)), cmap="viridis")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def _notebook(base: str):
    """The student's notebook: their words (a formula, a table, an attached
    image), a plotted heatmap, a written answer, and every payload."""
    png = _heatmap()
    words = new_markdown_cell(
        f"# Attention\n\n{WORDS} With $d_k$ the keys' size:\n\n"
        "$$\\mathrm{softmax}\\left(\\frac{QK^\\top}{\\sqrt{d_k}}\\right)V$$\n\n"
        "| token | weight |\n|---|---|\n| [CLS] | 0.9 |\n\n"
        "![my sketch](attachment:sketch.png)"
    )
    words.attachments = {"sketch.png": {"image/png": png}}
    plot = new_code_cell("plt.imshow(weights)")
    plot.outputs = [new_output("display_data", data={"image/png": png})]
    answer = new_markdown_cell(
        "Scaling by $\\sqrt{d_k}$ keeps the softmax unsaturated."
    )
    answer.metadata["nbgrader"] = {
        "grade": True,
        "solution": True,
        "locked": False,
        "task": False,
        "grade_id": GRADE_ID,
        "points": 2,
        "schema_version": 3,
    }
    active = new_code_cell("show(everything)")
    active.outputs = _outputs(base)
    payloads = [new_markdown_cell(text) for text in _markdown_payloads(base)]
    return new_notebook(cells=[words, plot, *payloads, active, answer])


class Listener:
    """A loopback HTTP server that records every request. It serves the pages
    under test, formgrader's static files, a stub of formgrader's grades and
    comments API, and MathJax; ``/pwned-*`` gets 204 (a page stays where it is)."""

    def __init__(self):
        self.pages: dict[str, str] = {}
        self.requests: list[tuple[str, str, bytes]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def _handler(self):
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, body=b"", kind="text/html; charset=utf-8"):
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                listener.requests.append(("GET", self.path, b""))
                self._send(*listener.answer(urlsplit(self.path).path))

            def do_PUT(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                listener.requests.append(("PUT", self.path, body))
                self._send(200, body, "application/json")

            do_POST = do_PUT

        return Handler

    def answer(self, path: str) -> tuple:
        """``(status, body, content type)`` for a GET of ``path``."""
        if path in self.pages:
            return 200, self.pages[path].encode()
        if path.startswith("/pwned-"):
            return (204,)
        api = {"/formgrader/api/grades": GRADES, "/formgrader/api/comments": COMMENTS}
        if path in api:
            return 200, json.dumps(api[path]).encode(), "application/json"
        for prefix, folder in STATIC.items():
            file = (folder / path.removeprefix(prefix)).resolve()
            if (
                path.startswith(prefix)
                and file.is_relative_to(folder)
                and file.is_file()
            ):
                kind = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
                return 200, file.read_bytes(), kind
        return (404,)

    def fired(self) -> set[str]:
        """The payload names of every ``/pwned-<name>`` request so far."""
        paths = (urlsplit(p).path for _, p, _ in self.requests)
        return {
            p.split("/")[1].removeprefix("pwned-")
            for p in paths
            if p.startswith("/pwned-")
        }

    def sent(self, method: str, path: str) -> list[dict]:
        """The JSON bodies of the ``method`` requests for ``path``."""
        return [json.loads(b) for m, p, b in self.requests if (m, p) == (method, path)]


@pytest.fixture(scope="module")
def listener():
    server = Listener()
    thread = threading.Thread(target=server.server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


def formgrader_config(monkeypatch, tmp_path, course: Path = ROOT):
    """The configuration formgrader gives its exporter (``FormgradeExtension``'s
    ``self.config``) in the instructor's server on the hub: its Jupyter config is
    ``hub/instructor/``, which loads ``course``'s ``nbgrader_config.py``."""
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(ROOT / "hub" / "instructor"))
    monkeypatch.setenv("COURSE_ROOT", str(course))
    monkeypatch.setenv("JUPYTER_PATH", grading.TEMPLATES)  # as the hub sets it
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # zh's template
    # zh's config sets COURSE_LANG in this process: set here, it is put back after.
    monkeypatch.setenv("COURSE_LANG", os.environ.get("COURSE_LANG", "en"))
    monkeypatch.setattr(sys, "path", list(sys.path))  # formgrader adds its cwd
    monkeypatch.chdir(tmp_path)
    app = FormgradeExtension()
    app.root_dir = str(course)
    app.initialize([])
    return app.config


def without_defence(config, *, nbconvert: bool):
    """``config`` without the course's steps, and without nbconvert's sanitising
    too unless ``nbconvert``."""
    config = copy.deepcopy(config)
    config.HTMLExporter.sanitize_html = nbconvert
    config.HTMLExporter.filters = {}
    steps = config.HTMLExporter.preprocessors
    config.HTMLExporter.preprocessors = [s for s in steps if inert.__name__ not in s]
    return config


def formgrade_page(config, nb, folder: Path) -> str:
    """The submission page formgrader's ``SubmissionHandler`` writes for ``nb``."""
    path = folder / "autograded" / STUDENT / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    resources = {
        "assignment_id": ASSIGNMENT,
        "notebook_id": NOTEBOOK,
        "submission_id": SUBMISSION,
        "index": 0,
        "total": 1,
        "base_url": "",
        "student": STUDENT,
        "last_name": None,
        "first_name": None,
        "notebook_path": f"/autograded/{STUDENT}/{ASSIGNMENT}/{NOTEBOOK}.ipynb",
    }
    html, _ = HTMLExporter(config=config).from_filename(str(path), resources=resources)
    return html


def feedback_page(nb, folder: Path) -> str:
    """The feedback page ``nbgrader generate_feedback`` makes for ``nb`` in a
    course folder (the course's configuration), graded by hand 1.5 of 2."""
    from nbgrader.api import Gradebook

    root = grading.make_course(folder / "course")
    source = grading.notebook_path(root, "source", ASSIGNMENT)
    source.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, source)
    grading.nbgrader("generate_assignment", ASSIGNMENT, "--force", root=root)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        gb.update_or_create_student(STUDENT)
        gb.add_submission(ASSIGNMENT, STUDENT)
        gb.find_grade(GRADE_ID, NOTEBOOK, ASSIGNMENT, STUDENT).manual_score = 1.5
        gb.db.commit()
    graded = grading.notebook_path(root, "autograded", ASSIGNMENT, student=STUDENT)
    graded.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, graded)
    grading.nbgrader("generate_feedback", ASSIGNMENT, "--force", root=root)
    return (root / "feedback" / STUDENT / ASSIGNMENT / f"{NOTEBOOK}.html").read_text()


SEEN = """() => ({
  markers: window.__pwned || [],
  title: document.title,
  url: location.pathname,
  text: document.body.innerText,
  formulas: document.querySelectorAll('.MathJax_Display').length,
  pngs: [...document.images].filter(
    i => i.src.startsWith('data:image/png') && i.complete && i.naturalWidth > 0
  ).length,
  headers: [...document.querySelectorAll('th')].map(th => th.innerText),
  code: [...document.querySelectorAll('.input_area')].map(a => a.innerText),
})"""


# The student's links: their words, and the payload each carries.
LINKS = {
    "read more": "md-link",
    "see the proof": "md-mdlink",
    "the files": "md-files-link",
}


def _open(listener, page, path: str, html: str) -> None:
    """Serve ``html`` at ``path``, open it, click the student's links."""
    listener.pages[path] = html
    listener.requests.clear()
    page.goto(listener.base + path)
    _click(page, LINKS)


def _click(page, words: Iterable[str]) -> None:
    """Click the links that say ``words``."""
    for text in words:
        page.locator("a", has_text=text).click()


def _inert(listener, page, path: str) -> dict:
    """What the page at ``path`` shows once typeset, with no payload fired."""
    page.wait_for_selector(".MathJax_Display", timeout=60000)
    page.wait_for_timeout(1500)  # past the refresh that <meta> asks for
    seen = page.evaluate(SEEN)
    assert listener.fired() == set()
    assert seen["markers"] == [] and "pwned" not in seen["title"]
    assert seen["url"] == path  # no refresh, no navigation
    assert WORDS in seen["text"] and "keeps the softmax unsaturated" in seen["text"]
    assert seen["formulas"] >= 1  # the display formula, typeset by MathJax
    assert seen["pngs"] >= 2  # the heatmap output and the attached image
    assert "weight" in seen["headers"]  # the markdown table
    assert any("plt.imshow(weights)" in code for code in seen["code"])
    return seen


@pytest.mark.slow
def test_formgrader_shows_a_submission_inert(listener, monkeypatch, tmp_path):
    """(a) formgrader's page: nothing fires, and its own score and comment boxes
    still load, save a full credit and save a comment."""
    config = formgrader_config(monkeypatch, tmp_path)
    html = formgrade_page(config, _notebook(listener.base), tmp_path)
    path = f"/formgrader/submissions/{SUBMISSION}/"
    with browser() as (ctx, blocked):
        page = ctx.new_page()
        _open(listener, page, path, html)
        _inert(listener, page, path)
        score, comment = (
            page.locator(f"#{GRADE_ID}"),
            page.locator(f"#{GRADE_ID}-comment"),
        )
        assert score.input_value() == "1.5" and comment.input_value() == "Looks right."
        cell = page.locator(".nbgrader_cell", has=score)
        cell.locator(".full-credit").click()
        comment.fill("Well argued.")
        comment.blur()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (
            listener.sent("PUT", "/formgrader/api/grade/g-written")
            and listener.sent("PUT", "/formgrader/api/comment/c-written")
        ):
            page.wait_for_timeout(200)
        assert listener.fired() == set() and blocked == []
    grades = listener.sent("PUT", "/formgrader/api/grade/g-written")
    comments = listener.sent("PUT", "/formgrader/api/comment/c-written")
    assert [g["manual_score"] for g in grades][-1:] == [2.0]
    assert [c["manual_comment"] for c in comments][-1:] == ["Well argued."]


@pytest.mark.slow
def test_feedback_shows_a_submission_inert(listener, tmp_path):
    """(b) the feedback page nbgrader makes with the course's configuration."""
    html = feedback_page(_notebook(listener.base), tmp_path)
    path = f"/files/feedback/{STUDENT}/{ASSIGNMENT}/{NOTEBOOK}.html"
    with browser() as (ctx, blocked):
        page = ctx.new_page()
        _open(listener, page, path, html)
        seen = _inert(listener, page, path)
        assert blocked == []
    assert "1.5 / 2.0" in seen["text"]  # the score the grader gave


@pytest.mark.parametrize(
    "nbconvert, fires",
    [(False, LIVE), (True, PAST_NBCONVERT)],
    ids=["off", "nbconvert"],
)
@pytest.mark.slow
def test_control_the_payloads_fire_without_the_defence(
    listener, monkeypatch, tmp_path, nbconvert, fires
):
    """The same notebook and exporter with the course's steps left out (and
    nbconvert's sanitising too, ``off``): the payloads fire, marker and request,
    and the student's heading takes the score box's id: formgrader's script fills
    the comment box but not the score box."""
    config = without_defence(
        formgrader_config(monkeypatch, tmp_path), nbconvert=nbconvert
    )
    html = formgrade_page(config, _notebook(listener.base), tmp_path)
    path = f"/formgrader/submissions/control-{nbconvert}/"
    with browser() as (ctx, _):
        page = ctx.new_page()
        _open(listener, page, path, html)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not fires <= listener.fired():
            page.wait_for_timeout(1000)
            # <meta>'s refresh, a navigation too, cancels a javascript: link
            # clicked at the same moment: click those again
            _click(
                page, [w for w, name in LINKS.items() if name not in listener.fired()]
            )
        markers = set(page.evaluate("window.__pwned || []"))
        comment = f"document.getElementById('{GRADE_ID}-comment').value"
        page.wait_for_function(f"{comment} === 'Looks right.'", timeout=30000)
        taken = page.evaluate(f"document.querySelectorAll('[id={GRADE_ID}]').length")
        score = page.locator(f"input#{GRADE_ID}").input_value()
    assert taken == 2 and score == ""
    assert fires <= listener.fired(), sorted(fires - listener.fired())
    assert fires & SCRIPTS <= markers, sorted(fires & SCRIPTS - markers)


@pytest.mark.slow
@pytest.mark.parametrize("edition", ["en", "zh"])
def test_both_editions_turn_the_defence_on(monkeypatch, tmp_path, edition):
    """formgrader's exporter (the hub's instructor server, either edition's
    course) and generate_feedback's configuration (the edition's own file)."""
    course = ROOT / "zh" if edition == "zh" else ROOT
    exporter = HTMLExporter(config=formgrader_config(monkeypatch, tmp_path, course))
    assert exporter.sanitize_html
    # formgrader's own page, with its score boxes (the Chinese edition's feedback
    # template stands in for nbgrader's "feedback" only: it showed submissions
    # without any score box while it was the exporter's template_name).
    assert exporter.template_name == "formgrade"
    assert isinstance(
        exporter.environment.filters["markdown2html"], inert.InertMarkdown
    )
    assert f"{inert.__name__}.InertOutputs" in exporter.preprocessors
    feedback = settings.load(course).HTMLExporter
    assert feedback.sanitize_html and "markdown2html" in feedback.filters
    assert f"{inert.__name__}.InertOutputs" in feedback.preprocessors


LINK = '<a rel="noopener noreferrer">x</a>'  # a link whose URL went


@pytest.mark.parametrize(
    "html, cleaned",
    [
        (
            '<img src="data:image/png;base64,AA==">',
            '<img src="data:image/png;base64,AA==">',
        ),
        ('<img src="data:text/html;base64,AA==">', "<img>"),
        ('<img src="figure.png" onerror="x()">', "<img>"),  # only the notebook's own
        (
            '<a href="https://example.org/" target="_top">x</a>',
            '<a href="https://example.org/" rel="noopener noreferrer">x</a>',
        ),
        ('<a href="//example.org/">x</a>', LINK),
        ('<a href="/\\example.org/">x</a>', LINK),
        ('<a href="java\tscript:x()">x</a>', LINK),
        ('<a href=" javascript:x()">x</a>', LINK),
        ('<a href="data:text/html,x">x</a>', LINK),
        (
            '<h2 id="t">t<a class="anchor-link" href="#t">¶</a></h2>',
            '<h2 id="student-t">t<a class="anchor-link" href="#student-t" '
            'rel="noopener noreferrer">¶</a></h2>',
        ),
        ('<span class="full-credit k">x</span>', '<span class="k">x</span>'),
        (
            '<table><tr><td style="text-align:left;position:fixed">1</td></tr></table>',
            '<table><tbody><tr><td style="text-align:left">1</td></tr></tbody></table>',
        ),
    ],
)
def test_clean_keeps_only_what_is_harmless(html, cleaned):
    assert inert.clean(html) == cleaned
