"""Two languages, one source: English (the default) and Simplified Chinese.

The notebooks are written once, in English (``source/<a>/<a>.py``). The Chinese
edition, ``zh/``, is an nbgrader course of its own, with the same grade ids, tests
and points; its notebooks are built from the English ones and a gettext catalog,
``course/locale/zh_CN/LC_MESSAGES/notebooks.po`` (msgctxt: the assignment; msgid:
a markdown cell, a code comment or a docstring, in English).

``python -m course.authoring --catalog`` brings the catalog up to date with Babel:
new English text enters it untranslated, changed text enters it fuzzy. The build
and the tests refuse both, so no cell exists in one language only.

Verdicts speak the same language: :func:`say` looks each English sentence up in
``verdicts.po`` (compiled to ``verdicts.mo``, read with the standard library's
:mod:`gettext`) when it is said, so a process that grades both editions speaks
each one's language. :func:`N_` marks a sentence for the catalog where it is
written (a module constant) and leaves it English until it is said.

``COURSE_LANG`` picks the language: ``en`` (default) or ``zh`` (``zh_CN``, ``zh-CN``).
The Chinese edition's ``nbgrader_config.py`` sets it for nbgrader and its kernels.
"""

from __future__ import annotations

import ast
import gettext
import io
import os
import re
import tokenize
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOCALES = {"zh": "zh_CN"}  # the languages besides English, and their locale
EDITIONS = {"en": ".", "zh": "zh"}  # each edition's course folder, from the root
COURSE_IDS = {"en": "attention-by-hand", "zh": "attention-by-hand-zh"}
MARKERS = re.compile(r"^\s*### (BEGIN|END) ")  # nbgrader's: never translated
WORDS = re.compile(r"[A-Za-z]{3,}")  # text with words needs a translation


def language(value: str | None = None) -> str:
    """``"en"`` or ``"zh"``: ``value``, else ``COURSE_LANG``, else English.

    Raises
    ------
    ValueError
        For a language the course does not speak.
    """
    raw = value or os.environ.get("COURSE_LANG") or "en"
    name = raw.strip().lower().replace("-", "_")
    if name.startswith("zh"):
        return "zh"
    if name.startswith("en") or name in ("c", "posix"):
        return "en"
    raise ValueError(f"COURSE_LANG={raw!r}: the course speaks en and zh")


def N_(message: str) -> str:
    """Mark ``message`` for the verdict catalog; it is translated when said."""
    return message


def say(message: str, /, **fields) -> str:
    """``message`` in the course's language, its ``{fields}`` filled in.

    A field that is itself a catalog sentence (the name of what was compared, a
    misconception) is translated too; any other field (empty, a name, a number,
    a student's error message) is passed through as it is. Unknown languages
    speak English.
    """
    table = compiled("verdicts")
    if table is not None:
        message = table.gettext(message)
        fields = {k: _field(table, v) for k, v in fields.items()}
    return message.format(**fields) if fields else message


def _field(table: gettext.GNUTranslations, value):
    """``value`` translated if it is a sentence of the catalog, else as it is.

    ``gettext("")`` is the catalog's header, never a translation: an empty field
    stays empty.
    """
    if not isinstance(value, str) or not value.strip():
        return value
    return table.gettext(value)


def tell(message: str, /, context: str | None = None, **fields) -> str:
    """:func:`say` for the self-study domain, ``hints.po``: a hint (``context``:
    its exercise) or a sentence of the hints and progress views."""
    table = compiled("hints")
    if table is not None:
        message = (
            table.pgettext(context, message) if context else table.gettext(message)
        )
    return message.format(**fields) if fields else message


_TABLES: dict[tuple[str, str], gettext.GNUTranslations] = {}


def compiled(domain: str) -> gettext.GNUTranslations | None:
    """The compiled catalog ``domain`` of the language now spoken (None: English)."""
    try:
        lang = language()
    except ValueError:
        return None
    if lang == "en":
        return None
    if (lang, domain) not in _TABLES:
        with catalog_path(lang, domain).with_suffix(".mo").open("rb") as f:
            _TABLES[lang, domain] = gettext.GNUTranslations(f)
    return _TABLES[lang, domain]


def configure(c, lang: str) -> None:
    """nbgrader settings of one edition (in its ``nbgrader_config.py``): its course
    id, its language for nbgrader's own process and every kernel it starts, and
    feedback pages whose labels (Score, Comments, ...) speak it too."""
    c.CourseDirectory.course_id = COURSE_IDS[lang]
    os.environ["COURSE_LANG"] = lang
    if lang == "en":
        return
    from .grading.feedback import feedback_template

    try:  # no home or no writable cache, or an nbgrader whose template moved a
        # label: nbgrader's English labels, never a failed command
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        folder = feedback_template(cache / "attention-by-hand")
    except (OSError, RuntimeError, ValueError):
        return
    c.HTMLExporter.template_name = folder.name
    c.HTMLExporter.extra_template_basedirs = [str(folder.parent)]


def edition_root(root: Path, lang: str) -> Path:
    """The course folder of one edition: ``root`` itself, or ``root/zh``."""
    return (Path(root) / EDITIONS[lang]).resolve()


def course_language(root: Path) -> str:
    """The language of the nbgrader course in ``root``, from the course id its
    ``nbgrader_config.py`` sets (:func:`configure`); else the language now spoken."""
    from traitlets.config.loader import ConfigFileNotFound, PyFileConfigLoader

    try:
        config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    except ConfigFileNotFound:
        return language()
    course_id = config.CourseDirectory.get("course_id")
    return {v: k for k, v in COURSE_IDS.items()}.get(course_id, language())


def available(root: Path, lang: str) -> str:
    """``lang`` if the course folder ``root`` has its edition, else English (a
    course copy may lack ``zh/``)."""
    return lang if (edition_root(root, lang) / "source").is_dir() else "en"


def lab_settings(lang: str) -> Path:
    """A JupyterLab settings folder whose ``overrides.json`` picks the language
    pack of ``lang`` (for ``--LabApp.app_settings_dir``)."""
    return HERE / "locale" / LOCALES[lang] / "lab"


def catalog_path(lang: str, domain: str = "notebooks") -> Path:
    """``course/locale/<locale>/LC_MESSAGES/<domain>.po``."""
    return HERE / "locale" / LOCALES[lang] / "LC_MESSAGES" / f"{domain}.po"


def read_catalog(path: Path):
    """A .po file as a Babel catalog (an empty one if there is none yet)."""
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import read_po

    if not path.exists():
        return Catalog(locale="zh_CN", project="attention-by-hand")
    with path.open("rb") as f:
        return read_po(f)


def translations(catalog) -> dict[tuple[str, str], str]:
    """``{(context, msgid): msgstr}`` of the finished entries (not empty, not fuzzy)."""
    return {
        (m.context, m.id): m.string
        for m in catalog
        if m.id and m.string and not m.fuzzy
    }


#: Where a code cell's string is a label a reader reads (a plot's title, a printed
#: line): an argument of these calls, the value of these keywords anywhere, or the
#: value assigned to (or looped over into) a variable of these names.
LABEL_CALLS = frozenset(
    {"print", "set_title", "set_xlabel", "set_ylabel", "suptitle", "title"}
    | {"xlabel", "ylabel", "text", "annotate"}
)
LABEL_KEYWORDS = frozenset({"title", "xlabel", "ylabel", "label"})
LABEL_NAMES = frozenset({"title", "label"})
_FIELDS = re.compile(r"\{[^{}]*\}")  # an f-string's {expression}: never translated


def _strings(node) -> list:
    """The string literals in ``node``, not inside a call or a subscript of it."""
    if isinstance(node, ast.Constant):
        return [node] if isinstance(node.value, str) else []
    if isinstance(node, ast.JoinedStr):
        return [node]
    if isinstance(node, ast.Call | ast.Subscript | ast.Compare | ast.Lambda):
        return []
    return [s for child in ast.iter_child_nodes(node) for s in _strings(child)]


def _names(target) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def label_strings(source: str) -> set[tuple[int, int]]:
    """``(line, column)`` of every string token of a code cell that is a label.

    The rule: :data:`LABEL_CALLS`, :data:`LABEL_KEYWORDS`, :data:`LABEL_NAMES`.
    Any other string (a text the model reads, a key, a colormap) is code.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:  # IPython syntax: no labels
        return set()
    nodes = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else None
            name = func.id if isinstance(func, ast.Name) else name
            if name in LABEL_CALLS:
                nodes += [s for arg in node.args for s in _strings(arg)]
            for kw in node.keywords:
                if kw.arg in LABEL_KEYWORDS:
                    nodes += _strings(kw.value)
        elif isinstance(node, ast.Assign):
            if any(_names(t) & LABEL_NAMES for t in node.targets):
                nodes += _strings(node.value)
        elif isinstance(node, ast.For) and _names(node.target) & LABEL_NAMES:
            nodes += _strings(node.iter)
    lines = source.splitlines(keepends=True)
    spans = set()
    for n in nodes:  # ast columns count UTF-8 bytes; tokenize's count characters
        first = lines[n.lineno - 1].encode()[: n.col_offset].decode()
        last = lines[n.end_lineno - 1].encode()[: n.end_col_offset].decode()
        spans.add(((n.lineno, len(first)), (n.end_lineno, len(last))))
    found = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.STRING and any(a <= tok.start < b for a, b in spans):
            found.add(tok.start)
    return found


def _inside_quotes(token: str) -> tuple[int, int]:
    """Where a string token's text starts and ends (after its prefix and quotes)."""
    prefix = len(token) - len(token.lstrip("rRbBuUfF"))
    quote = 3 if token[prefix : prefix + 3] in ('"""', "'''") else 1
    return prefix + quote, len(token) - quote


def pieces(source: str, cell_type: str) -> list[tuple[int, int, str]]:
    """What a reader reads in one cell: ``(start, end, text)`` spans of ``source``.

    A markdown cell is one piece. In code: each comment (its text after ``#``),
    each docstring (between its triple quotes) and each label string
    (:func:`label_strings`: a plot's title, a printed line, between its quotes)
    that holds words (an f-string's ``{fields}`` are no words).
    """
    if cell_type == "markdown":
        return [(0, len(source), source)] if WORDS.search(source) else []
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    labels = label_strings(source)
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        start = offsets[tok.start[0] - 1] + tok.start[1]
        end = offsets[tok.end[0] - 1] + tok.end[1]
        if tok.type == tokenize.COMMENT and not MARKERS.match(tok.string):
            text = tok.string[1:].strip()
            if WORDS.search(text):
                found.append((end - len(tok.string[1:].lstrip()), end, text))
        elif tok.type == tokenize.STRING and tok.string.startswith('"""'):
            found.append((start + 3, end - 3, tok.string[3:-3]))
        elif tok.type == tokenize.STRING and tok.start in labels:
            a, b = _inside_quotes(tok.string)
            text = tok.string[a:b]
            if WORDS.search(_FIELDS.sub("", text)):
                found.append((start + a, start + b, text))
    return found


def translate(nb, context: str, table: dict) -> list[str]:
    """Replace, in place, every piece of notebook ``nb`` by its translation.

    Returns the pieces that have none (left in English).
    """
    missing = []
    for cell in nb.cells:
        text = cell.source
        for start, end, piece in reversed(pieces(text, cell.cell_type)):
            done = table.get((context, piece))
            if done is None:
                missing.append(piece)
                continue
            text = text[:start] + done + text[end:]
        cell.source = text
    return missing[::-1]


def update_catalog(notebooks: dict, path: Path):
    """Bring the catalog at ``path`` up to date with ``{context: English notebook}``.

    New pieces enter untranslated; changed ones fuzzy (Babel's matching); pieces
    gone from the notebooks leave the catalog. Returns the catalog written.
    """
    from babel.messages.catalog import Catalog

    template = Catalog(project="attention-by-hand")
    for context, nb in notebooks.items():
        for index, cell in enumerate(nb.cells):
            for _, _, piece in pieces(cell.source, cell.cell_type):
                template.add(piece, context=context, locations=[(context, index)])
    return _merge(template, path)


def _merge(template, path: Path):
    """Update the catalog at ``path`` from ``template`` (Babel) and write it."""
    from babel.messages.pofile import write_po

    catalog = read_catalog(path)
    template.creation_date = catalog.creation_date  # no churn in the header
    catalog.update(template)
    catalog.obsolete.clear()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        write_po(f, catalog, width=88, ignore_obsolete=True)
    return catalog


#: Where verdicts are written, and the calls that mark them for the catalog.
VERDICT_SOURCES = ("checks", "grading")  # the grader: feedback, check, report
VERDICT_KEYWORDS = {"say": None, "fail": None, "N_": None}


def verdict_template():
    """Every sentence marked in the checks, as a Babel catalog (no translations)."""
    from babel.messages.catalog import Catalog
    from babel.messages.extract import extract_from_dir

    template = Catalog(project="attention-by-hand")
    for folder in VERDICT_SOURCES:
        found = extract_from_dir(
            HERE / folder,
            method_map=[("**.py", "python")],
            keywords=VERDICT_KEYWORDS,
            comment_tags=(),
        )
        for filename, lineno, message, _, context in found:
            if isinstance(message, str):
                template.add(message, context=context, locations=[(filename, lineno)])
    return template


def update_verdicts(lang: str) -> None:
    """Bring ``verdicts.po`` up to date with the checks; compile ``verdicts.mo``."""
    path = catalog_path(lang, "verdicts")
    compile_catalog(_merge(verdict_template(), path), path.with_suffix(".mo"))


def update_hints(lang: str, template) -> None:
    """Bring ``hints.po`` up to date with the hints (:func:`course.hintbook.template`);
    compile ``hints.mo``."""
    path = catalog_path(lang, "hints")
    compile_catalog(_merge(template, path), path.with_suffix(".mo"))


def compile_catalog(catalog, path: Path | None = None) -> bytes:
    """The ``.mo`` bytes of a catalog's finished entries (written to ``path``)."""
    from babel.messages.mofile import write_mo

    out = io.BytesIO()
    write_mo(out, catalog)
    if path is not None:
        path.write_bytes(out.getvalue())
    return out.getvalue()
