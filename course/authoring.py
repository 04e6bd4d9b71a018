"""Build the source notebooks from their jupytext percent files.

Each ``source/<a>/<a>.py`` is the authored truth of ``source/<a>/<a>.ipynb``. A cell
header names its nbgrader role in short form, and the build writes the full nbgrader
metadata (schema 3)::

    # %% answer="head_params"            autograded answer cell
    # %% test="test_head_params_shape" points=1
    # %% [markdown] task="why_out_in" points=2
    # %% [markdown] open=true            a free cell (e.g. for a written answer)
    # %% / # %% [markdown]               read-only (locked) cell

Cell ids are the grade ids, so the build is deterministic and ``--check`` can prove
every pair in sync.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import jupytext
import nbformat
from ipykernel.ipkernel import IPythonKernel

from . import catalog, hintauthoring, hintbook, i18n
from .grading import cells

ROOT = Path(__file__).resolve().parent.parent
#: What a test cell with hidden tests says above them, so that they are never a
#: surprise: the release keeps these lines and drops the hidden tests.
HIDDEN_NOTICE = (
    "# Hidden tests also run here when graded. To run them now, in this folder:\n"
    "#   python -m course check {notebook}\n"
)
BASE = {
    "grade": False,
    "locked": False,
    "schema_version": 3,
    "solution": False,
    "task": False,
}


def _nbgrader(meta: dict, kind: str, index: int) -> dict:
    if "answer" in meta:
        return {**BASE, "solution": True, "grade_id": meta.pop("answer")}
    if "test" in meta:
        points = meta.pop("points")
        return {
            **BASE,
            "grade": True,
            "locked": True,
            "grade_id": meta.pop("test"),
            "points": points,
        }
    if "task" in meta:
        points = meta.pop("points")
        return {
            **BASE,
            "task": True,
            "locked": True,
            "grade_id": meta.pop("task"),
            "points": points,
        }
    return {**BASE, "locked": True, "grade_id": f"{kind}-{index:02d}"}


def build(py_path: Path) -> nbformat.NotebookNode:
    """Read one percent file and return its nbgrader source notebook."""
    nb = jupytext.read(py_path, fmt="py:percent")
    # The kernel's own language_info: JupyterLab writes it into a notebook whose
    # kernel starts, so any other value marks the notebook modified on opening.
    nb.metadata = {
        "kernelspec": nb.metadata["kernelspec"],
        "language_info": dict(IPythonKernel.language_info),
    }
    for index, cell in enumerate(nb.cells):
        meta = dict(cell.metadata)
        meta.pop("lines_to_next_cell", None)
        if meta.pop("open", False):  # a free cell for the student: no nbgrader role
            cell.metadata, cell.id = meta, f"{cell.cell_type}-{index:02d}"
            continue
        grading = _nbgrader(meta, cell.cell_type, index)
        cell.metadata = {**meta, "nbgrader": grading}
        cell.id = grading["grade_id"]
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        if grading["grade"] and cells.BEGIN_HIDDEN in cell.source:
            notice = HIDDEN_NOTICE.format(notebook=f"{py_path.stem}.ipynb")
            cell.source = cell.source.replace(
                cells.BEGIN_HIDDEN, notice + cells.BEGIN_HIDDEN, 1
            )
    nbformat.validate(nb)
    return nb


def notebook_text(nb: nbformat.NotebookNode) -> str:
    """The exact text a built notebook is stored as."""
    return nbformat.writes(nb, version=4) + "\n"


def sources(root: Path = ROOT) -> list[Path]:
    """Every ``source/<a>/<a>.py``."""
    return sorted(
        p for p in (root / "source").glob("*/*.py") if p.stem == p.parent.name
    )


def editions(
    py_path: Path, root: Path, tables: dict[str, dict]
) -> dict[Path, nbformat.NotebookNode]:
    """``{target .ipynb: notebook}`` of one percent file, in every language.

    The Chinese edition (``zh/source/<a>/<a>.ipynb``) is the English notebook with
    each piece translated by the catalog's ``tables[lang]`` (:mod:`course.i18n`);
    a piece without a translation stays English, and the catalog test names it.
    """
    nb = build(py_path)
    out = {py_path.with_suffix(".ipynb"): nb}
    for lang, table in tables.items():
        translated = nbformat.from_dict(copy.deepcopy(nb))
        catalog.translate(translated, py_path.stem, table)
        edition = i18n.edition_root(root, lang)
        out[edition / "source" / py_path.parent.name / f"{py_path.stem}.ipynb"] = (
            translated
        )
    return out


def main(argv: list[str] | None = None) -> int:
    """Build (or with ``--check`` verify) every source notebook, in each language."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="fail if any .ipynb is stale"
    )
    parser.add_argument(
        "--catalog",
        action="store_true",
        help="first bring the translation catalogs up to date with the notebooks "
        "and the checks' verdicts (and compile the verdicts)",
    )
    parser.add_argument("--root", type=Path, default=ROOT, help="the course folder")
    args = parser.parse_args(argv)
    english = {py.stem: build(py) for py in sources(args.root)}
    hints = hintauthoring.build(english, args.root, catalog.declared_mistakes())
    if args.catalog:
        for lang in i18n.LOCALES:
            catalog.update_catalog(english, i18n.catalog_path(lang))
            catalog.update_verdicts(lang)
            catalog.update_hints(lang, hints)
    tables = {  # each catalog read once, for every notebook
        lang: catalog.translations(catalog.read_catalog(i18n.catalog_path(lang)))
        for lang in i18n.LOCALES
    }
    stale = []
    if args.root.resolve() == ROOT:  # a copy of the course (an instructor's) has no
        # package of its own: the hints the kernels read are the installed course's
        stale += _write(
            hintbook.DATA,
            hintauthoring.text(hintauthoring.public(hints)),
            check=args.check,
        )
        stale += _write(
            hintbook.TEXTS,
            hintauthoring.text(hintauthoring.written(hints)),
            check=args.check,
        )
    for py in sources(args.root):
        for target, nb in editions(py, args.root, tables).items():
            stale += _write(target, notebook_text(nb), check=args.check)
    if args.check and stale:
        print(
            "stale (run `make notebooks`):",
            *[str(p.relative_to(args.root)) for p in stale],
        )
        return 1
    return 0


def _write(target: Path, text: str, *, check: bool) -> list[Path]:
    """Write ``text`` to ``target`` unless it holds it already (or ``check``);
    ``[target]`` if it was stale."""
    if target.exists() and target.read_text("utf-8") == text:
        return []
    if not check:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, "utf-8")
        print(
            f"built {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}"
        )
    return [target]


if __name__ == "__main__":
    sys.exit(main())
