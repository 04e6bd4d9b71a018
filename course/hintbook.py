"""The hints of every exercise, and the misconceptions they answer.

Hints are written beside each exercise, in ``source/<a>/hints.toml``: for each
exercise (an answer cell's grade id) at least three ``steps``, from the idea to the
approach to the shape of the code, and for a misconception a check names, a hint
under the misconception's key::

    [softmax]
    steps = ["the idea ...", "the approach ...", "the shape of the code ..."]

    [softmax.mistakes.overflow]
    hint = "..."
    name = "..."  # optional: the views' name for it, if the sentence's first clause
                  # is too long or starts with a {field} (the authoring says which)

The key is declared once, where the check's sentence is written
(``N_("softmax(x, dim={dim}) gives NaN/inf ...", mistake="overflow")``): the verdict
carries it (:func:`course.i18n.mistakes_of`) into the kernel's progress, ``course
check`` and the grader, so rewording a sentence never unhooks its hint.

``python -m course.authoring`` builds them into the package data, in two parts:
``course/data/hints.json``, what the kernel reads to follow a student's progress
(each exercise's test cells, how many steps, each mistake's whole sentence, for its
name), and ``course/data/hint_texts.json``, the hints'
texts (in Chinese: ``hinttexts.po``). On a course hub whose hints cost points only
the hub's service may read the texts (:mod:`course.grading.hub.private` seals them);
:func:`texts` then raises :class:`Sealed`.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from pathlib import Path

from .i18n import compiled

DATA = Path(__file__).resolve().parent / "data" / "hints.json"
TEXTS = DATA.with_name("hint_texts.json")
TEXT_DOMAIN = "hinttexts"  # the texts' catalog: hinttexts.po


class Sealed(Exception):
    """The hints' texts are the course hub's alone: ask its service."""


@functools.cache
def book() -> dict:
    """``{assignment: {exercise: entry}}`` in course order (the package data).

    An entry: ``tests`` (its test cells' ids), ``hidden`` (those whose test is
    hidden in the student's copy), ``steps`` (how many step hints) and
    ``mistakes`` (``{key: {"verdict": catalog sentence, "name"?: its name}}``).
    """
    return json.loads(DATA.read_text("utf-8"))


def texts() -> dict:
    """``{assignment: {exercise: {"steps": [...], "mistakes": {key: hint}}}}``,
    in English (read at each call: the file may be sealed meanwhile)."""
    try:
        return json.loads(TEXTS.read_text("utf-8"))
    except PermissionError:
        raise Sealed(str(TEXTS)) from None


def _translated(text: str, context: str) -> str:
    try:
        table = compiled(TEXT_DOMAIN)
    except PermissionError:
        raise Sealed(TEXT_DOMAIN) from None
    return table.pgettext(context, text) if table else text


def place(cell_id: str | None) -> tuple[str, str, str] | None:
    """``(assignment, exercise, "answer" or "test")`` of a notebook cell id."""
    if not cell_id:
        return None
    for assignment, exercises in book().items():
        for exercise, entry in exercises.items():
            if cell_id == exercise:
                return assignment, exercise, "answer"
            if cell_id in entry["tests"]:
                return assignment, exercise, "test"
    return None


def find(exercise: str) -> tuple[str, dict] | None:
    """``(assignment, entry)`` of an exercise id, or None."""
    for assignment, exercises in book().items():
        if exercise in exercises:
            return assignment, exercises[exercise]
    return None


def steps(assignment: str, exercise: str) -> list[str]:
    """The step hints of one exercise, in the course's language (:class:`Sealed`
    where they are the hub's alone)."""
    context = f"{assignment}/{exercise}"
    written = texts()[assignment][exercise]["steps"]
    return [_translated(h, context) for h in written]


def mistake_hint(assignment: str, exercise: str, key: str) -> str:
    """The hint written for one named misconception, in the course's language."""
    text = texts()[assignment][exercise]["mistakes"][key]
    return _translated(text, f"{assignment}/{exercise}")


NAME_WIDTH = 60  # columns of a mistake's name in the views (a CJK character: 2)
NAME_DOMAIN, NAME_CONTEXT = "hints", "mistake"  # a written name's catalog (hints.po)


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def mistake_name(assignment: str, exercise: str, key: str) -> str:
    """A misconception as the views name it, in the course's language: its
    ``name`` from ``hints.toml`` or, without one, the first clause of its check's
    sentence (each ``{field}`` shown as ``…``); ``key`` for an unknown one."""
    mistake = book().get(assignment, {}).get(exercise, {}).get("mistakes", {})
    if key not in mistake:
        return key
    if "name" in mistake[key]:
        table = compiled(NAME_DOMAIN)
        name = mistake[key]["name"]
        return table.pgettext(NAME_CONTEXT, name) if table else name
    table = compiled("verdicts")
    sentence = mistake[key]["verdict"]
    return first_clause(table.gettext(sentence) if table else sentence)


def first_clause(sentence: str) -> str:
    """A misconception's name where none is written.

    Parameters
    ----------
    sentence : str
        A check's catalog sentence, in either language.

    Returns
    -------
    str
        The sentence up to its first ``.:;`` (or ``。：；``), each ``{field}`` as ``…``.
    """
    words = re.sub(r"\{[^{}]*\}", "…", sentence)
    first = re.split(r"(?<=[.:;])\s|(?<=[。：；])", words, maxsplit=1)[0]
    return first.rstrip(".:;。：；")


def readable(name: str) -> bool:
    """Whether a misconception's name reads in the views.

    Parameters
    ----------
    name : str
        A written name, or a check's first clause (:func:`first_clause`).

    Returns
    -------
    bool
        At most :data:`NAME_WIDTH` columns (a CJK character: 2), and not starting
        with a field (``… reaches …`` names nothing).
    """
    return not name.startswith("…") and _width(name) <= NAME_WIDTH


def named_mistake(assignment: str, exercise: str, mistakes) -> str | None:
    """The first of ``mistakes`` (keys a verdict named, :func:`course.i18n.
    mistakes_of`) that ``exercise`` has a hint for, or None."""
    known = book().get(assignment, {}).get(exercise, {}).get("mistakes", {})
    return next((key for key in mistakes if key in known), None)
