"""The catalogs, authored with Babel: notebooks and verdicts in two languages.

The notebooks are written once, in English (``source/<a>/<a>.py``). The Chinese
edition, ``zh/``, is an nbgrader course of its own, with the same grade ids, tests
and points; its notebooks are built from the English ones and a gettext catalog,
``course/locale/zh_CN/LC_MESSAGES/notebooks.po`` (msgctxt: the assignment; msgid:
a markdown cell, a code comment or a docstring, in English).

``python -m course.authoring --catalog`` brings the catalogs up to date with Babel:
new English text enters them untranslated, changed text enters them fuzzy. The
build and the tests refuse both, so no cell exists in one language only. The
verdict catalog, ``verdicts.po``, is compiled to the ``verdicts.mo`` that
:func:`course.i18n.say` reads at run time.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

from .grading.cells import MARKER_LINE
from .i18n import HERE, catalog_path

WORDS = re.compile(r"[A-Za-z]{3,}")  # text with words needs a translation


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
        if tok.type == tokenize.COMMENT and not MARKER_LINE.match(tok.string):
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
VERDICT_FILES = ("lab.py",)  # JupyterLab's Check and Hint buttons
VERDICT_KEYWORDS = {"say": None, "fail": None, "N_": None}


def marked_sentences(source: str) -> list[tuple[int, str]]:
    """``(line, sentence)`` of every call of :data:`VERDICT_KEYWORDS` in ``source``
    whose first argument is a string, however deep inside other calls it is
    (Babel's extractor misses one inside another call's arguments:
    ``fail(with_hint(say("..."), hint))``)."""
    return [(call.lineno, call.args[0].value) for call in _marking_calls(source)]


def _marking_calls(source: str) -> list[ast.Call]:
    """Every call of :data:`VERDICT_KEYWORDS` in ``source`` whose first argument is
    a string."""
    return [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and _called(node) in VERDICT_KEYWORDS
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ]


def declared_mistakes() -> dict[str, str]:
    """``{key: sentence}``: every misconception the checks can name, declared where
    its sentence is written (``N_("...", mistake="key")``, the same in ``say`` and
    ``fail``).

    Raises
    ------
    ValueError
        A key given to two different sentences.
    """
    out: dict[str, str] = {}
    for path in verdict_files():
        for call in _marking_calls(path.read_text()):
            for keyword in call.keywords:
                if keyword.arg == "mistake" and isinstance(keyword.value, ast.Constant):
                    key, sentence = keyword.value.value, call.args[0].value
                    if out.setdefault(key, sentence) != sentence:
                        raise ValueError(f"mistake {key!r} names two sentences")
    return out


def _called(node: ast.Call) -> str | None:
    """The name a call calls: ``say`` for ``say(...)`` and ``i18n.say(...)``."""
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def verdict_files() -> list[Path]:
    """The files whose marked sentences are the verdict catalog."""
    found = [
        p for folder in VERDICT_SOURCES for p in sorted((HERE / folder).rglob("*.py"))
    ]
    return found + [HERE / name for name in VERDICT_FILES]


def verdict_template():
    """Every sentence marked in the checks, as a Babel catalog (no translations)."""
    from babel.messages.catalog import Catalog
    from babel.messages.extract import extract_from_dir, extract_from_file

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
    for name in VERDICT_FILES:
        found = extract_from_file(
            "python", HERE / name, keywords=VERDICT_KEYWORDS, comment_tags=()
        )
        for lineno, message, _, context in found:
            if isinstance(message, str):
                template.add(message, context=context, locations=[(name, lineno)])
    for path in verdict_files():  # those Babel's extractor does not reach
        where = path.relative_to(HERE).as_posix()
        for lineno, message in marked_sentences(path.read_text()):
            if message not in template:
                template.add(message, locations=[(where, lineno)])
    return template


def update_verdicts(lang: str) -> None:
    """Bring ``verdicts.po`` up to date with the checks; compile ``verdicts.mo``."""
    path = catalog_path(lang, "verdicts")
    compile_catalog(_merge(verdict_template(), path), path.with_suffix(".mo"))


def update_hints(lang: str, data: dict) -> None:
    """Bring ``hints.po`` (the views' sentences) and ``hinttexts.po`` (the hints)
    up to date with the hints (:func:`course.hintauthoring.build`); compile both."""
    from . import hintauthoring, hintbook

    for domain, template in (
        (hintbook.NAME_DOMAIN, hintauthoring.template(data)),
        (hintbook.TEXT_DOMAIN, hintauthoring.text_template(data)),
    ):
        path = catalog_path(lang, domain)
        compile_catalog(_merge(template, path), path.with_suffix(".mo"))


def compile_catalog(catalog, path: Path | None = None) -> bytes:
    """The ``.mo`` bytes of a catalog's finished entries (written to ``path``)."""
    from babel.messages.mofile import write_mo

    out = io.BytesIO()
    write_mo(out, catalog)
    if path is not None:
        path.write_bytes(out.getvalue())
    return out.getvalue()
