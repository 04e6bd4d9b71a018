"""Run nbgrader on a course folder.

These are the building blocks of ``python -m course`` and of the tests that grade
fixture submissions; all of them work on any course root (the repository, or a
copy in a temporary folder).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from .. import i18n
from . import nbgrader_app
from .cells import folder
from .environment import tool_env
from .nbgrader_app import private_url

ROOT = Path(__file__).resolve().parents[2]


def assignments(root: Path = ROOT) -> list[str]:
    """Assignment names, i.e. the folders of ``source/``, in course order."""
    return sorted(p.name for p in (root / "source").iterdir() if p.is_dir())


def make_course(
    dest: Path, root: Path = ROOT, lang: str = "en", only: list[str] | None = None
) -> Path:
    """Copy one edition's ``source/`` (its assignments ``only``, if given) and the
    course's ``nbgrader_config.py`` (with that edition's settings,
    :func:`course.grading.settings.configure`) into a fresh course folder."""
    dest.mkdir(parents=True, exist_ok=True)
    config = (root / "nbgrader_config.py").read_text()
    if lang != "en":  # as the edition's own config does
        config += (
            f'\nfrom course.grading.settings import configure\nconfigure(c, "{lang}")\n'
        )
    (dest / "nbgrader_config.py").write_text(config)
    source = i18n.edition_root(root, lang) / "source"
    for name in assignments(source.parent) if only is None else only:
        shutil.copytree(source / name, dest / "source" / name, dirs_exist_ok=True)
    return dest


def nbgrader(
    *args: str, root: Path, check: bool = True, db_url: str | None = None
) -> subprocess.CompletedProcess:
    """Run ``nbgrader ARGS`` with ``root`` as the course folder and cwd, on the
    gradebook ``db_url`` if given (told in private: :mod:`.nbgrader_app`)."""
    cmd = [sys.executable, "-m", nbgrader_app.__name__, *args]
    cmd.append(f"--CourseDirectory.root={root}")
    env = {**tool_env(), "PYTHONWARNINGS": "ignore", **private_url(db_url)}
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def release(names: list[str], root: Path = ROOT) -> None:
    """Generate ``release/<a>`` for each assignment (``nbgrader generate_assignment``)."""
    for name in names:
        nbgrader("generate_assignment", name, "--force", root=root)


def has_source(root: Path, assignment: str) -> bool:
    """Whether the course folder ``root`` holds ``source/<assignment>/``."""
    return folder(root, "source", assignment).is_dir()


def validate(path: Path) -> list[str]:
    """Run nbgrader's Validator on one notebook; return one line per failing cell.

    ``nbgrader validate`` exits 0 even when tests fail, so callers that need a
    verdict use this instead. An empty list means every cell ran and passed. Cells
    get the course's time (:mod:`course.grading.settings`).
    """
    from nbgrader.validator import Validator
    from traitlets.config import Config

    from .settings import resolve

    config = Config()
    config.Validator.validate_all = True
    config.Execute.timeout = resolve(ROOT).cell_timeout
    result = Validator(config=config).validate(str(path))
    lines = []
    for key, cells in result.items():
        for cell in cells:
            first = cell.get("source", "").strip().splitlines()[:1]
            lines.append(
                f"{key}: {first[0] if first else ''} -> {cell.get('raw_error', '')}"
            )
    return lines
