"""The course that ships with the package, so that a student checks without
``source/``: each edition's released notebooks with their test cells whole.

``course check`` grades a notebook with a real ``nbgrader autograde`` (hidden
tests included), and autograde needs a gradebook, which ``generate_assignment``
makes from a source notebook. The instructor's ``source/`` holds the solutions,
so it never reaches a student. What does is this course folder, built by ``course
release`` into the package (``course/data/selfcheck/``):

* ``source/<a>/<a>.ipynb`` (and ``zh/source/...``): the released notebook, every
  answer cell its stub, every test cell as the instructor wrote it, its hidden
  tests too. Hidden tests are calls into :mod:`course.checks`, whose oracles are
  the model, bertviz and torch: they hold no answer.
* ``nbgrader_config.py``: the course's, so that the pipeline that grades is the
  instructor's.

Generating an assignment from it gives the committed ``release/`` notebook
exactly (``tests/test_grading_shipped.py``), so the self-check grades the very
notebook a student got, with the gradebook the instructor's release makes.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from .. import i18n
from ..i18n import speaking, tell
from ..worked import HIDDEN, TESTS_HEADING, seal
from .cells import (
    BEGIN_HIDDEN,
    MARK_SCHEME,
    SOLUTION_LINE,
    SOLUTION_REGION,
    exercise,
    folder,
    grade_id,
    is_answer,
    is_test,
    notebook_path,
)
from .runs import ROOT, assignments

#: Where the package keeps it.
SHIPPED = Path(__file__).resolve().parents[1] / "data" / "selfcheck"
CONFIG = "nbgrader_config.py"


def notebook(*, released: dict, source: dict) -> dict:
    """The shipped notebook of one assignment: ``released`` (the student's
    notebook as ``generate_assignment`` made it) with each test cell's source
    taken from ``source`` (hidden tests included), each answer cell the
    source's with every solution region emptied (``generate_assignment`` puts the
    stub there, as in the release), and no checksum."""
    theirs = {grade_id(c): "".join(c["source"]) for c in source["cells"]}
    nb = copy.deepcopy(released)
    for cell in nb["cells"]:
        cell["metadata"].get("nbgrader", {}).pop("checksum", None)
        if is_test(cell):
            cell["source"] = theirs[grade_id(cell)]
        elif is_answer(cell) and SOLUTION_REGION.search(theirs[grade_id(cell)]):
            cell["source"] = SOLUTION_REGION.sub(r"\1\3", theirs[grade_id(cell)])
    return nb


def worked(*, source: dict, name: str) -> dict:
    """The worked answers of one assignment, from its ``source`` notebook:
    ``{item: {"kind", "sealed"}}`` (:mod:`course.worked`). An exercise's is its
    solution and what its tests check; a written answer's, its mark scheme."""
    answers = [grade_id(c) for c in source["cells"] if is_answer(c)]
    tests: dict[str, list[str]] = {}
    for cell in source["cells"]:
        if is_test(cell):
            text = "".join(cell["source"])
            doc = text.split('"""')[1] if text.startswith('"""') else grade_id(cell)
            points = cell["metadata"]["nbgrader"]["points"]
            hidden = f" {tell(HIDDEN)}" if BEGIN_HIDDEN in text else ""
            line = f"- {doc} [{points:g}]{hidden}"
            tests.setdefault(exercise(grade_id(cell), answers), []).append(line)
    found = {}
    for cell in source["cells"]:
        item, text = grade_id(cell), "".join(cell["source"])
        if is_answer(cell) and cell["cell_type"] == "code":
            code = SOLUTION_LINE.sub("", text).strip()
            checked = "\n".join(tests.get(item, []))
            body = f"{code}\n\n{tell(TESTS_HEADING)}\n{checked}"
            found[item] = {"kind": "exercise", "sealed": seal(f"{name}/{item}", body)}
        elif cell["metadata"].get("nbgrader", {}).get("task"):
            scheme = MARK_SCHEME.search(text)
            body = scheme[1].strip() if scheme else ""
            found[item] = {"kind": "written", "sealed": seal(f"{name}/{item}", body)}
    return found


def build(root: Path = ROOT) -> dict[Path, str]:
    """``{path under the shipped course: text}`` of the course folder ``root``:
    its config and, per edition and assignment, the shipped notebook."""
    root = Path(root).resolve()
    files = {Path(CONFIG): (root / CONFIG).read_text("utf-8")}
    for lang in i18n.EDITIONS:
        edition = i18n.edition_root(root, lang)
        if not (edition / "source").is_dir():
            continue
        answers = {}
        for name in assignments(edition):
            released = json.loads(notebook_path(edition, "release", name).read_text())
            source = json.loads(notebook_path(edition, "source", name).read_text())
            target = folder(edition, "source", name) / f"{name}.ipynb"
            text = json.dumps(
                notebook(released=released, source=source),
                indent=1,
                ensure_ascii=False,
            )
            files[target.relative_to(root)] = text + "\n"
            with speaking(lang):
                answers[name] = worked(source=source, name=name)
        target = (edition / "worked.json").relative_to(root)
        files[target] = json.dumps(answers, indent=1, ensure_ascii=False) + "\n"
    return files


def _stale(fresh: dict[Path, str], shipped: Path) -> list[Path]:
    found = {p.relative_to(shipped) for p in shipped.rglob("*") if p.is_file()}
    wrong = [
        p
        for p, text in fresh.items()
        if not (shipped / p).is_file() or (shipped / p).read_text("utf-8") != text
    ]
    return sorted(
        wrong + [p for p in found - set(fresh) if "__pycache__" not in p.parts]
    )


def stale(root: Path = ROOT, *, shipped: Path = SHIPPED) -> list[Path]:
    """The shipped files that differ from a fresh :func:`build` (or are extra)."""
    return _stale(build(root), shipped)


def write(root: Path = ROOT, *, shipped: Path = SHIPPED) -> list[Path]:
    """Bring the shipped course up to date with ``root``; the files it wrote."""
    fresh = build(root)
    changed = _stale(fresh, shipped)
    for path in changed:
        target = shipped / path
        if path in fresh:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(fresh[path], "utf-8")
        else:
            target.unlink()
    return changed
