"""Building the hints' package data (``python -m course.authoring``).

Reads each exercise's hints from ``source/<a>/hints.toml`` and the built English
notebooks, whose cell roles and test-to-exercise rule are nbgrader's and the
course's own (:mod:`course.grading.cells`); writes what :mod:`course.hintbook`
reads at run time (``hints.json``, ``hint_texts.json``) and the catalogs to
translate. Runs where the course is authored, never in a student's kernel.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from . import hintbook
from .grading import cells

MIN_STEPS = 3


def build(notebooks: dict, root: Path, declared: dict[str, str]) -> dict:
    """The package data from ``source/<a>/hints.toml`` and the built notebooks.

    Parameters
    ----------
    notebooks : dict
        ``{assignment: English source notebook}``.
    root : Path
        The course folder.
    declared : dict
        ``{key: sentence}``, every misconception a check can name
        (:func:`course.catalog.declared_mistakes`).

    Raises
    ------
    ValueError
        An exercise without its hints, fewer than three steps, a hint for a
        misconception no check declares, or an unknown exercise.
    """
    out = {}
    for assignment, nb in notebooks.items():
        answers = [c.id for c in nb.cells if cells.is_answer(c)]
        hints_file = cells.folder(root, "source", assignment) / "hints.toml"
        written = tomllib.loads(hints_file.read_text("utf-8"))
        if extra := set(written) - set(answers):
            raise ValueError(f"{assignment}: hints for no exercise: {sorted(extra)}")
        entries = {}
        for exercise in answers:
            if len(written.get(exercise, {}).get("steps", [])) < MIN_STEPS:
                raise ValueError(f"{assignment}/{exercise}: fewer than three hints")
            tests = [
                c
                for c in nb.cells
                if cells.is_test(c) and cells.exercise(c.id, answers) == exercise
            ]
            mistakes = {
                key: _mistake(m, declared, key=key, where=f"{assignment}/{exercise}")
                for key, m in written[exercise].get("mistakes", {}).items()
            }
            entries[exercise] = {
                "tests": [c.id for c in tests],
                "hidden": [c.id for c in tests if cells.has_hidden_tests(c.source)],
                "steps": written[exercise]["steps"],
                "mistakes": mistakes,
            }
        out[assignment] = entries
    ids = [i for ex in out.values() for e, v in ex.items() for i in [e, *v["tests"]]]
    if twice := sorted({i for i in ids if ids.count(i) > 1}):
        raise ValueError(f"ids of two exercises: {twice}")  # a cell id names one
    return out


def _mistake(written: dict, declared: dict[str, str], *, key: str, where: str) -> dict:
    """One misconception: its check's whole sentence, its hint, and its ``name``
    where the sentence's first clause would not read as one."""
    if key not in declared:
        raise ValueError(f"{where}/{key}: no check names the mistake {key!r}")
    mistake = {"verdict": declared[key], "hint": written["hint"]}
    name = written.get("name") or hintbook.first_clause(mistake["verdict"])
    if not hintbook.readable(name):
        width = hintbook.NAME_WIDTH
        raise ValueError(
            f"{where}/{key}: give it a name (at most {width} columns): {name!r}"
        )
    if written.get("name"):  # an empty one is none
        mistake["name"] = written["name"]
    return mistake


def public(data: dict) -> dict:
    """What :func:`build` made, without the texts: ``hints.json``."""
    return {
        a: {
            e: {
                "tests": entry["tests"],
                "hidden": entry["hidden"],
                "steps": len(entry["steps"]),
                "mistakes": {
                    k: {f: m[f] for f in ("verdict", "name") if f in m}
                    for k, m in entry["mistakes"].items()
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


def template(data: dict):
    """Every sentence of the hints and progress views, and each misconception's
    written name (context ``mistake``), as a Babel catalog to translate
    (``hints.po``)."""
    from babel.messages.catalog import Catalog
    from babel.messages.extract import extract_from_file

    catalog = Catalog(project="attention-by-hand")
    here = hintbook.DATA.parent.parent
    views = ("hints.py", "hubhints.py", "progress.py", "worked.py")
    for name in (*views, "grading/hub/hintservice.py"):
        found = extract_from_file(
            "python", here / name, keywords={"tell": None, "N_": None}
        )
        for lineno, message, _, context in found:
            if isinstance(message, str):
                catalog.add(message, context=context, locations=[(name, lineno)])
    for assignment, exercises in data.items():
        for entry in exercises.values():
            for mistake in entry["mistakes"].values():
                if mistake.get("name"):
                    catalog.add(
                        mistake["name"],
                        context=hintbook.NAME_CONTEXT,
                        locations=[(assignment, 0)],
                    )
    return catalog
