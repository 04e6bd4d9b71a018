"""Where a student's work lives: one folder, found the same way by every command.

A student's *work folder* holds their assignment folders and their record
(``.course/progress.sqlite``): ``mywork/`` of the course folder by default
(``mywork-zh/`` for the Chinese edition), or the folder nbgrader's Assignment List
fetches into on the course hub. ``course lab``, ``course check``, ``course hint``,
``course progress`` and the kernel's own record all ask :func:`home`, so a check
and the hint after it read one record, whatever folder each was run from:

1. ``COURSE_PROGRESS_DIR``, where it is set;
2. the work folder that holds ``start`` (a notebook's folder, or the folder a
   command runs in): an assignment folder's parent, or a folder that holds
   assignment folders or a record;
3. ``mywork/`` of the course folder given with ``--root``;
4. the work folder ``course lab`` last opened (it leaves a note of it in the
   user's state folder, :func:`remember`);
5. ``mywork/`` of the folder the command runs in.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import hintbook

ENV = "COURSE_PROGRESS_DIR"  # where the work and its record are, if set
RECORD = ".course"  # the record's folder inside the work folder


def folder_name(lang: str) -> str:
    """``mywork`` (``mywork-zh`` for the Chinese edition): the course folder's
    work folder, as ``course lab`` makes it."""
    return "mywork" if lang == "en" else f"mywork-{lang}"


def holding(start: Path) -> Path | None:
    """The work folder that holds ``start`` or is it, else ``None``."""
    start = Path(start).resolve()
    names = set(hintbook.book())
    for folder in (start, *start.parents):
        if folder.name in names:
            return folder.parent
        if (folder / RECORD).is_dir() or any((folder / n).is_dir() for n in names):
            return folder
    return None


def _note(lang: str) -> Path:
    state = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(state) / "attention-by-hand" / f"work-{lang}"


def remember(work: Path, *, lang: str) -> None:
    """Note that ``work`` is the student's work folder (``course lab`` does)."""
    try:
        note = _note(lang)
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text(str(Path(work).resolve()), "utf-8")
    except OSError:  # no writable home: the other rules still find it
        pass


def _remembered(lang: str) -> Path | None:
    try:
        work = Path(_note(lang).read_text("utf-8").strip())
    except OSError:
        return None
    return work if work.is_dir() else None


def home(
    *, start: Path | None = None, root: Path | None = None, lang: str = "en"
) -> Path:
    """The student's work folder, by the rules of this module's docstring.

    Parameters
    ----------
    start : path, optional
        Where to look first: a notebook's folder (default: the current folder).
    root : path, optional
        The course folder, where the student named one (``--root``).
    lang : str
        The edition: its work folder is its own.

    Returns
    -------
    Path
    """
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    found = holding(start or Path.cwd())
    if found is not None:
        return found
    if root is not None:
        return Path(root).resolve() / folder_name(lang)
    return _remembered(lang) or Path.cwd().resolve() / folder_name(lang)
