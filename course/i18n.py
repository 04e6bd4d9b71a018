"""Two languages, one source: English (the default) and Simplified Chinese.

The notebooks are written once, in English (``source/<a>/<a>.py``). The Chinese
edition, ``zh/``, is an nbgrader course of its own, with the same grade ids, tests
and points; its notebooks are built from the English ones and a gettext catalog,
``course/locale/zh_CN/LC_MESSAGES/notebooks.po`` (msgctxt: the assignment; msgid:
a markdown cell, a code comment or a docstring, in English).

``python -m course.authoring --catalog`` brings the catalog up to date with Babel:
new English text enters it untranslated, changed text enters it fuzzy. The build
and the tests refuse both, so no cell exists in one language only.

``COURSE_LANG`` picks the language: ``en`` (default) or ``zh`` (``zh_CN``, ``zh-CN``).
"""

from __future__ import annotations

import io
import os
import re
import tokenize
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po, write_po

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


def edition_root(root: Path, lang: str) -> Path:
    """The course folder of one edition: ``root`` itself, or ``root/zh``."""
    return (Path(root) / EDITIONS[lang]).resolve()


def lab_settings(lang: str) -> Path:
    """A JupyterLab settings folder whose ``overrides.json`` picks the language
    pack of ``lang`` (for ``--LabApp.app_settings_dir``)."""
    return HERE / "locale" / LOCALES[lang] / "lab"


def catalog_path(lang: str, domain: str = "notebooks") -> Path:
    """``course/locale/<locale>/LC_MESSAGES/<domain>.po``."""
    return HERE / "locale" / LOCALES[lang] / "LC_MESSAGES" / f"{domain}.po"


def read_catalog(path: Path) -> Catalog:
    """A .po file as a Babel catalog (an empty one if there is none yet)."""
    if not path.exists():
        return Catalog(locale="zh_CN", project="attention-by-hand")
    with path.open("rb") as f:
        return read_po(f)


def translations(catalog: Catalog) -> dict[tuple[str, str], str]:
    """``{(context, msgid): msgstr}`` of the finished entries (not empty, not fuzzy)."""
    return {
        (m.context, m.id): m.string
        for m in catalog
        if m.id and m.string and not m.fuzzy
    }


def pieces(source: str, cell_type: str) -> list[tuple[int, int, str]]:
    """What a reader reads in one cell: ``(start, end, text)`` spans of ``source``.

    A markdown cell is one piece. In code: each comment (its text after ``#``) and
    each docstring (between its triple quotes) that holds words.
    """
    if cell_type == "markdown":
        return [(0, len(source), source)] if WORDS.search(source) else []
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
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


def update_catalog(notebooks: dict, path: Path) -> Catalog:
    """Bring the catalog at ``path`` up to date with ``{context: English notebook}``.

    New pieces enter untranslated; changed ones fuzzy (Babel's matching); pieces
    gone from the notebooks leave the catalog. Returns the catalog written.
    """
    template = Catalog(project="attention-by-hand")
    for context, nb in notebooks.items():
        for index, cell in enumerate(nb.cells):
            for _, _, piece in pieces(cell.source, cell.cell_type):
                template.add(piece, context=context, locations=[(context, index)])
    catalog = read_catalog(path)
    catalog.update(template)
    catalog.obsolete.clear()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        write_po(f, catalog, width=88, ignore_obsolete=True)
    return catalog
