"""What the students of a course hub must not read, and making it so.

On the hub every account runs the course's Python from the project folder (its
virtual environment, its ``course`` package): the folder is readable by all. Parts
of it are the instructor's alone: the solutions and hidden tests (``source/``, and
the tests' own correct and wrong answers, ``tests/``), the history that holds them
(``.git``), the class's work and grades, the worked answers (unless the instructor
gives them, :mod:`course.worked`), and the hints' texts, which on the hub
come only from its hint service (:mod:`course.grading.hub.hintservice`), whose
record is what a hint costs. :func:`seal`, called by the hub as it starts (as
root), takes every permission of "others" from each of them. The class's work is
made after that (collected submissions, autograded notebooks, feedback, reports):
:func:`make_work_folders` makes their folders first, so that they are sealed
before anything is written into them.

Only the mode bits are read: an access control list or a shared group that gives
students more is the administrator's to remove.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ... import hintbook, i18n, worked

#: The folders nbgrader and ``course`` write the class's work into.
WORK = ("submitted", "autograded", "feedback", "reports")
#: The instructor's parts of a course folder (and of each edition's).
INSTRUCTOR = ("source", *WORK, "gradebook.db")
#: The project's own: the tests' answers, the bench's, and the history.
PROJECT = (".git", "tests", "bench")


def course_roots(*, project: Path, course_root: Path) -> list[Path]:
    """The course folders of a hub: the project's, its Chinese edition's and the
    one the instructor grades in (one folder, where they are the same)."""
    project = Path(project)
    return sorted({project, project / "zh", Path(course_root)})


def make_work_folders(*, project: Path, course_root: Path) -> list[Path]:
    """Make the folders of the class's work that are missing in each course folder
    (:data:`WORK`), owned as their course folder is and private from the start;
    return those made."""
    made = []
    for root in course_roots(project=project, course_root=course_root):
        if not root.is_dir():
            continue
        owner = root.stat()
        for name in WORK:
            folder = root / name
            if not folder.exists():
                folder.mkdir(mode=0o700)
                os.chown(folder, owner.st_uid, owner.st_gid)
                made.append(folder)
    return made


def secrets(
    *, project: Path, course_root: Path, state: Path, worked_answers: bool = False
) -> list[Path]:
    """What students must not read: of the project (and its Chinese edition),
    of the course folder the instructor grades in (all of it, where it is not the
    project's: a gradebook made later is private too), the hub's state, the
    hints' texts, and the worked answers unless ``worked_answers`` (the
    instructor's ``c.HintPolicy.worked_answers``). Those that exist."""
    project, course_root = Path(project), Path(course_root)
    roots = course_roots(project=project, course_root=course_root)
    paths = [root / name for root in roots for name in INSTRUCTOR]
    if course_root not in (project, project / "zh"):  # a folder of the instructor's:
        paths.append(course_root)  # all of it, what it will hold too
    paths += [Path(project) / name for name in PROJECT]
    paths += [Path(state), hintbook.TEXTS]
    if not worked_answers:
        paths += [worked.path(lang) for lang in i18n.EDITIONS]
    for lang in i18n.LOCALES:
        if lang != "en":
            po = i18n.catalog_path(lang, hintbook.TEXT_DOMAIN)
            paths += [po, po.with_suffix(".mo")]
    return [p for p in paths if p.exists()]


def readable_by_others(path: Path) -> bool:
    """Whether an account that is neither the owner nor in the group can read
    ``path``: it is readable by others and every folder above it searchable."""
    path = Path(path).resolve()
    if not path.stat().st_mode & stat.S_IROTH:
        return False
    return all(p.stat().st_mode & stat.S_IXOTH for p in path.parents)


def seal(paths: list[Path]) -> list[Path]:
    """Take every permission of others from each path that others can read;
    return those changed. (A folder sealed seals all below it.)"""
    changed = []
    for path in paths:
        if readable_by_others(path):
            mode = stat.S_IMODE(path.stat().st_mode)
            os.chmod(path, mode & ~stat.S_IRWXO)
            changed.append(path)
    return changed


def keep_home_private(account: str) -> bool:
    """Take every permission of others from the home folder of Unix ``account``
    (group and others, as ``useradd``'s ``HOME_MODE 0700`` would); return whether
    it changed. An account without a home folder is left as it is."""
    import pwd

    try:
        home = Path(pwd.getpwnam(account).pw_dir)
        mode = stat.S_IMODE(home.stat().st_mode)
    except (KeyError, FileNotFoundError):
        return False
    if not mode & (stat.S_IRWXG | stat.S_IRWXO):
        return False
    os.chmod(home, mode & stat.S_IRWXU)
    return True
