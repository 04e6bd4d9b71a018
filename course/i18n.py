"""Two languages, one source, at run time: English (the default) and Simplified
Chinese.

Verdicts speak the course's language: :func:`say` looks each English sentence up
in ``verdicts.po`` (compiled to ``verdicts.mo``, read with the standard library's
:mod:`gettext`) when it is said, so a process that grades both editions speaks
each one's language. :func:`N_` marks a sentence for the catalog where it is
written (a module constant) and leaves it English until it is said.

``COURSE_LANG`` picks the language: ``en`` (default) or ``zh`` (``zh_CN``, ``zh-CN``);
:func:`speaking` picks it for a block of code. The Chinese edition's
``nbgrader_config.py`` sets it for nbgrader and its kernels
(:func:`course.grading.settings.configure`).

This module is what a student's kernel loads (through the checks): it imports
nothing of the grader. Authoring the catalogs (Babel) is :mod:`course.catalog`.
"""

from __future__ import annotations

import contextlib
import gettext
import os
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOCALES = {"zh": "zh_CN"}  # the languages besides English, and their locale
EDITIONS = {"en": ".", "zh": "zh"}  # each edition's course folder, from the root
_SPOKEN: list[str] = []  # set by speaking(): the language of a block of code


def language(value: str | None = None) -> str:
    """``"en"`` or ``"zh"``: ``value``, else ``COURSE_LANG``, else English.

    Raises
    ------
    ValueError
        For a language the course does not speak.
    """
    spoken = _SPOKEN[-1] if _SPOKEN else None
    raw = value or spoken or os.environ.get("COURSE_LANG") or "en"
    name = raw.strip().lower().replace("-", "_")
    if name.startswith("zh"):
        return "zh"
    if name.startswith("en") or name in ("c", "posix"):
        return "en"
    raise ValueError(f"COURSE_LANG={raw!r}: the course speaks en and zh")


@contextlib.contextmanager
def speaking(lang: str):
    """Speak ``lang`` (``en``, ``zh``) inside the block, whatever ``COURSE_LANG``
    says; the process environment is left as it is."""
    _SPOKEN.append(language(lang))
    try:
        yield
    finally:
        _SPOKEN.pop()


class Said(str):
    """A sentence that names misconceptions: ``mistakes`` holds their keys, in the
    order the sentence names them (the keys ``hints.toml`` gives hints for)."""

    mistakes: tuple[str, ...] = ()


def mistakes_of(text) -> tuple[str, ...]:
    """The keys of the misconceptions ``text`` names (empty for any other value)."""
    return getattr(text, "mistakes", ())


def naming(text: str, *named) -> str:
    """``text`` naming every misconception that the values ``named`` name (a
    sentence made of other sentences names what they name)."""
    return with_keys(text, (k for part in named for k in mistakes_of(part)))


def with_keys(text: str, keys) -> str:
    """``text`` naming the misconceptions whose keys are ``keys`` (in order, once
    each; ``text`` itself when there are none)."""
    keys = tuple(dict.fromkeys(filter(None, keys)))
    if not keys:
        return text
    out = Said(text)
    out.mistakes = keys
    return out


def N_(message: str, /, *, mistake: str | None = None) -> str:
    """Mark ``message`` for the verdict catalog; it is translated when said.

    ``mistake`` is the key of the misconception the sentence names: the sentence
    carries it wherever it is said, and ``hints.toml`` answers it by that key.
    """
    return with_keys(message, [mistake])


def say(message: str, /, *, mistake: str | None = None, **fields) -> str:
    """``message`` in the course's language, its ``{fields}`` filled in.

    A field that is itself a catalog sentence (the name of what was compared, a
    misconception) is translated too; any other field (empty, a name, a number,
    a student's error message) is passed through as it is. Unknown languages
    speak English. The result names the misconception ``mistake`` (its key), and
    those the message and its fields name (:func:`mistakes_of`).
    """
    keys = [mistake, *mistakes_of(message)]
    keys += [k for v in fields.values() for k in mistakes_of(v)]
    table = compiled("verdicts")
    if table is None:
        return with_keys(message.format(**fields) if fields else message, keys)
    message = table.gettext(message)
    fields = {k: _field(table, v) for k, v in fields.items()}
    return with_keys(_han_joined(message.format(**fields) if fields else message), keys)


_HAN = "\u4e00-\u9fff"
_FULL_WIDTH = "，。：；！？、（）「」『』“”"
#: Where a filled-in Chinese sentence needs a space taken out: between two Han
#: characters, or beside full-width punctuation. Such a space comes from a
#: template's space beside a field that is Chinese itself ("{name} 含有"), or ends
#: in full-width punctuation ("{err} Linear ..."), or from an English join.
_NO_SPACE = re.compile(
    rf"(?<=[{_HAN}]) +(?=[{_HAN}])|(?<=[{_FULL_WIDTH}]) +| +(?=[{_FULL_WIDTH}])"
)
#: Where one is put in: between Han and Latin letters, digits or code, where a
#: field ending in Latin meets the template's Han ("{what}上" with BERT).
_SPACE = re.compile(rf"(?<=[{_HAN}])(?=[A-Za-z0-9`])|(?<=[A-Za-z0-9`)\]])(?=[{_HAN}])")


def _han_joined(text: str) -> str:
    """``text`` spaced as d2l-zh prints Chinese: no space between two Han
    characters or beside full-width punctuation, one between Han and Latin."""
    return _SPACE.sub(" ", _NO_SPACE.sub("", text))


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


def sentences(*parts: str | None) -> str:
    """The non-empty ``parts`` as one text: after full-width punctuation (Chinese)
    the next sentence follows at once, after any other a space comes between."""
    text = ""
    for part in filter(None, parts):
        text += part if not text or text[-1] in "。！？）」：；" else " " + part
    return naming(text, *parts)


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


def edition_root(root: Path, lang: str) -> Path:
    """The course folder of one edition: ``root`` itself, or ``root/zh``."""
    return (Path(root) / EDITIONS[lang]).resolve()


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
