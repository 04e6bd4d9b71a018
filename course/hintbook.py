"""The hints of every exercise, and the misconceptions they answer.

Hints are written beside each exercise, in ``source/<a>/hints.toml``: for each
exercise (an answer cell's grade id) at least three ``steps``, from the idea to the
approach to the shape of the code, and for a misconception a check names, a hint of
its own under a stable key::

    [softmax]
    steps = ["the idea ...", "the approach ...", "the shape of the code ..."]

    [softmax.mistakes.overflow]
    verdict = "softmax(x, dim={dim}) gives NaN/inf"  # how the check's message starts
    hint = "..."

``python -m course.authoring`` builds them into the package data, in two parts:
``course/data/hints.json``, what the kernel reads to follow a student's progress
(each exercise's test cells, how many steps, each ``verdict`` resolved to the
check's whole catalog sentence), and ``course/data/hint_texts.json``, the hints'
texts (in Chinese: ``hinttexts.po``). On a course hub whose hints cost points only
the hub's service may read the texts (:mod:`course.grading.private` seals them);
:func:`texts` then raises :class:`Sealed`.
"""

from __future__ import annotations

import functools
import json
import re
import tomllib
from pathlib import Path

from .i18n import compiled

DATA = Path(__file__).resolve().parent / "data" / "hints.json"
TEXTS = DATA.with_name("hint_texts.json")
TEXT_DOMAIN = "hinttexts"  # the texts' catalog: hinttexts.po
HIDDEN = "### BEGIN HIDDEN TESTS"
MIN_STEPS = 3


class Sealed(Exception):
    """The hints' texts are the course hub's alone: ask its service."""


@functools.cache
def book() -> dict:
    """``{assignment: {exercise: entry}}`` in course order (the package data).

    An entry: ``tests`` (its test cells' ids), ``hidden`` (those whose test is
    hidden in the student's copy), ``steps`` (how many step hints) and
    ``mistakes`` (``{key: {"verdict": catalog sentence}}``).
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


def _pattern(sentence: str) -> re.Pattern:
    """A catalog sentence as a regex: its ``{fields}`` match anything."""
    parts = re.split(r"\{[^{}]*\}", sentence)
    return re.compile(".*?".join(re.escape(p) for p in parts), re.DOTALL)


def named_mistake(assignment: str, exercise: str, verdict: str) -> str | None:
    """The key of the misconception a check's ``verdict`` names, or None.

    The verdict is in the course's language; each misconception's sentence is
    looked up in the same verdict catalog, so both editions match.
    """
    table = compiled("verdicts")
    mistakes = book().get(assignment, {}).get(exercise, {}).get("mistakes", {})
    for key, mistake in mistakes.items():
        sentence = table.gettext(mistake["verdict"]) if table else mistake["verdict"]
        if _pattern(sentence).search(verdict):
            return key
    return None


# --- building the package data (python -m course.authoring) ----------------------


def _owner(test_id: str, exercises: list[str]) -> str | None:
    """The exercise a test cell belongs to: the longest id it starts with."""
    owners = [e for e in exercises if test_id.startswith(f"test_{e}")]
    return max(owners, key=len) if owners else None


def build(notebooks: dict, root: Path, verdicts: list[str]) -> dict:
    """The package data from ``source/<a>/hints.toml`` and the built notebooks.

    Parameters
    ----------
    notebooks : dict
        ``{assignment: English source notebook}``.
    root : Path
        The course folder.
    verdicts : list of str
        Every sentence of the verdict catalog; a ``verdict`` must start exactly one.

    Raises
    ------
    ValueError
        An exercise without its hints, fewer than three steps, a misconception
        whose verdict starts no check sentence or several, or an unknown exercise.
    """
    out = {}
    for assignment, nb in notebooks.items():
        cells = [c for c in nb.cells if "nbgrader" in c.metadata]
        answers = [c.id for c in cells if c.metadata["nbgrader"]["solution"]]
        written = tomllib.loads(
            (root / "source" / assignment / "hints.toml").read_text("utf-8")
        )
        if extra := set(written) - set(answers):
            raise ValueError(f"{assignment}: hints for no exercise: {sorted(extra)}")
        entries = {}
        for exercise in answers:
            if len(written.get(exercise, {}).get("steps", [])) < MIN_STEPS:
                raise ValueError(f"{assignment}/{exercise}: fewer than three hints")
            tests = [
                c
                for c in cells
                if c.metadata["nbgrader"]["grade"] and _owner(c.id, answers) == exercise
            ]
            mistakes = {
                key: {"verdict": _resolve(m["verdict"], verdicts), "hint": m["hint"]}
                for key, m in written[exercise].get("mistakes", {}).items()
            }
            entries[exercise] = {
                "tests": [c.id for c in tests],
                "hidden": [c.id for c in tests if HIDDEN in c.source],
                "steps": written[exercise]["steps"],
                "mistakes": mistakes,
            }
        out[assignment] = entries
    ids = [i for ex in out.values() for e, v in ex.items() for i in [e, *v["tests"]]]
    if twice := sorted({i for i in ids if ids.count(i) > 1}):
        raise ValueError(f"ids of two exercises: {twice}")  # a cell id names one
    return out


def _resolve(start: str, verdicts: list[str]) -> str:
    found = [v for v in verdicts if v.startswith(start)]
    if len(found) != 1:
        raise ValueError(f"{start!r} starts {len(found)} check sentences, not one")
    return found[0]


def public(data: dict) -> dict:
    """What :func:`build` made, without the texts: ``hints.json``."""
    return {
        a: {
            e: {
                "tests": entry["tests"],
                "hidden": entry["hidden"],
                "steps": len(entry["steps"]),
                "mistakes": {
                    k: {"verdict": m["verdict"]} for k, m in entry["mistakes"].items()
                },
            }
            for e, entry in exercises.items()
        }
        for a, exercises in data.items()
    }


def written(data: dict) -> dict:
    """What :func:`build` made, the texts alone: ``hint_texts.json``."""
    return {
        a: {
            e: {
                "steps": entry["steps"],
                "mistakes": {k: m["hint"] for k, m in entry["mistakes"].items()},
            }
            for e, entry in exercises.items()
        }
        for a, exercises in data.items()
    }


def text(data: dict) -> str:
    """The exact text a part of the package data is stored as."""
    return json.dumps(data, ensure_ascii=False, indent=1) + "\n"


def text_template(data: dict):
    """Every hint (context ``<assignment>/<exercise>``) as a Babel catalog to
    translate (``hinttexts.po``)."""
    from babel.messages.catalog import Catalog

    catalog = Catalog(project="attention-by-hand")
    for assignment, exercises in data.items():
        for exercise, entry in exercises.items():
            context = f"{assignment}/{exercise}"
            texts = entry["steps"] + [m["hint"] for m in entry["mistakes"].values()]
            for hint in texts:
                catalog.add(hint, context=context, locations=[(assignment, 0)])
    return catalog


def template():
    """Every sentence of the hints and progress views, as a Babel catalog to
    translate (``hints.po``)."""
    from babel.messages.catalog import Catalog
    from babel.messages.extract import extract_from_file

    catalog = Catalog(project="attention-by-hand")
    here = Path(__file__).resolve().parent
    for name in ("hints.py", "hubhints.py", "progress.py", "grading/hintservice.py"):
        found = extract_from_file(
            "python", here / name, keywords={"tell": None, "N_": None}
        )
        for lineno, message, _, context in found:
            if isinstance(message, str):
                catalog.add(message, context=context, locations=[(name, lineno)])
    return catalog
