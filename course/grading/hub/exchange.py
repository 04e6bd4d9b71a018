"""The course's nbgrader exchange: submissions taken as data, feedback given back.

nbgrader's exchange is a folder every account can write: a student's ``nbgrader
submit`` copies the notebook into ``inbound/`` under a name that says whose it is
(``ana+01_config+TIMESTAMP+RANDOM``) and writes the time into its
``timestamp.txt``. Both are the student's word. nbgrader's own collect warns when a
name and the folder's owner differ ("cheating attempt?") and collects it all the
same, takes the time from the name and the file, and copies with links followed,
as the instructor. :class:`OwnedCollect`, the course's ``ExchangeFactory.collect``
(``nbgrader_config.py``), takes a submission as data instead:

* **Who.** An entry whose Unix owner is not the student it names is refused and
  reported; the student's own entries are collected as if it were not there.
* **When.** A submission's time is the exchange's: the latest change time
  (``ctime``) of anything in it, which no account can set back. It decides which
  submission is the latest and is written into the collected ``timestamp.txt``,
  so late penalties and the hints asked after submitting hold. (A write through
  a shared memory map reaches ctime only when the page is written back, about
  30 s later on ext4: a due date is this exact, no more.)
* **What.** Only folders and regular files are copied, each opened without
  following a link (``O_NOFOLLOW``, relative to its folder), so a link swapped in
  while collecting is refused too. Links and other entries are left out and
  reported, as is a file its sender does not own; an entry that cannot be read
  as a submission (a name that is not one, folders 32 deep, more than 10,000
  entries, more bytes than nbgrader allows, sparse or not) is refused. The class
  is collected all the same.

On the hub every server runs with umask 077, the instructor's too, so the
feedback pages it writes are its own alone; :class:`ReadableFeedback`, the
course's ``ExchangeFactory.release_feedback``, makes each page it releases
readable as nbgrader means it to be: by the student who holds the page's secret
name (the exchange's feedback folder cannot be listed).
"""

from __future__ import annotations

import fnmatch
import glob
import os
import pwd
import shutil
import stat
from datetime import UTC, datetime

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default.collect import ExchangeCollect, groupby
from nbgrader.exchange.default.release_feedback import ExchangeReleaseFeedback
from nbgrader.utils import check_mode

#: How nbgrader writes a time into ``timestamp.txt`` (``nbgrader submit``).
TIME_FORMAT = "%Y-%m-%d %H:%M:%S.%f %Z"
NO_COURSE = "No course id specified. Re-run with --course flag."  # nbgrader's
MAX_DEPTH = 32  # folders in folders of one submission
MAX_ENTRIES = 10000  # files and folders of one submission
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK


def exchange_time(path: str) -> datetime:
    """When the exchange last saw ``path`` change: the latest ``ctime`` of it and
    of everything below it, links not followed (UTC)."""
    latest = os.lstat(path).st_ctime
    for folder, folders, files in os.walk(path, followlinks=False):
        for name in folders + files:
            try:
                latest = max(latest, os.lstat(os.path.join(folder, name)).st_ctime)
            except FileNotFoundError:  # gone meanwhile
                continue
    return datetime.fromtimestamp(latest, UTC)


def owner(path: str) -> str:
    """The Unix account that owns ``path`` itself (a link is not followed)."""
    uid = os.lstat(path).st_uid
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


class OwnedCollect(ExchangeCollect):
    """nbgrader's collect that refuses a submission its sender does not own, times
    each by the exchange, and copies regular files only (module docstring)."""

    def init_src(self):
        self._check_inbound()
        student = self.coursedir.student_id or "*"
        assignment = self.coursedir.assignment_id
        pattern = os.path.join(self.inbound_path, f"{student}+{assignment}+*")
        records = [r for r in map(self._safe_record, glob.glob(pattern)) if r]
        self.src_records = [
            self._chosen(group)
            for group in groupby(records, lambda r: r["username"]).values()
        ]

    def _check_inbound(self) -> None:
        """nbgrader's checks of the course and its inbound folder, and the due
        date (its ``init_src`` without reading any entry's name)."""
        if self.coursedir.course_id == "":
            self.fail(NO_COURSE)
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        if not check_mode(self.inbound_path, read=True, execute=True):
            self.fail(f"You don't have read permissions for: {self.inbound_path}")
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                self.duedate = gb.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                self.duedate = None

    def _safe_record(self, path: str) -> dict | None:
        """:meth:`_owned_record`, or ``None`` (reported) for an entry that cannot
        be read as one: the class is collected all the same."""
        try:
            return self._owned_record(path)
        except (OSError, ValueError, OverflowError, RecursionError) as err:
            name = os.path.basename(path)
            self.log.error("Refused %s: %s", name, type(err).__name__)
            return None

    def _owned_record(self, path: str) -> dict | None:
        """The record of inbound entry ``path``, timed by the exchange; ``None``
        (reported) for one not a folder of the student it names."""
        record = self._path_to_record(path)
        sender = owner(path)
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            self.log.error("Refused %s: not a folder (a link?)", record["filename"])
            return None
        if sender != record["username"]:
            self.log.error(
                "Refused %s: it names %s but %s sent it; %s's own submissions are "
                "collected as if it were not there",
                record["filename"], record["username"], sender, record["username"],
            )  # fmt: skip
            return None
        record["timestamp"] = exchange_time(path)
        return record

    def _chosen(self, records: list[dict]) -> dict:
        """The latest of one student's records (the latest before the due date,
        with ``--before-duedate``), as nbgrader chooses."""
        latest = self._sort_by_timestamp(records)
        if self.duedate is not None and self.before_duedate:
            on_time = [r for r in latest if r["timestamp"] <= self.duedate]
            return (on_time or latest)[0]
        return latest[0]

    def do_copy(self, src, dest, log=None):
        """Copy the folders and regular files of ``src`` to ``dest`` and write the
        exchange's time into its ``timestamp.txt``."""
        limit = 1000 * self.coursedir.max_dir_size  # bytes, as nbgrader counts
        copier = _PlainCopy(self._ignored, limit, uid=os.lstat(src).st_uid)
        try:
            source = os.open(src, _DIR_FLAGS)
            try:
                copier.folder(source, dest)
            finally:
                os.close(source)
            stamp = os.path.join(dest, "timestamp.txt")  # ours, whatever was there
            if os.path.isdir(stamp):
                shutil.rmtree(stamp)
            with open(stamp, "w") as file:
                file.write(exchange_time(src).strftime(TIME_FORMAT))
        except (OSError, ValueError, RuntimeError, RecursionError) as err:
            shutil.rmtree(dest, ignore_errors=True)
            self.log.error("Refused %s: %s", os.path.basename(src), err)
            return
        for skipped in copier.skipped:
            self.log.warning("Left out of %s: %s", os.path.basename(src), skipped)

    def _ignored(self, name: str, size: int | None) -> bool:
        """Whether nbgrader's own rules leave ``name`` out (``CourseDirectory``'s
        ignore, include and max_file_size; ``size`` None for a folder)."""
        course = self.coursedir
        if any(fnmatch.fnmatch(name, glob) for glob in course.ignore):
            return True
        if size is None:
            return False
        if course.include and not any(fnmatch.fnmatch(name, g) for g in course.include):
            return True
        return size > 1000 * course.max_file_size


class _PlainCopy:
    """A copy of a folder tree that opens every entry relative to its folder and
    never through a link; what it leaves out is in ``skipped``."""

    def __init__(self, ignored, limit: int, *, uid: int):
        self.ignored, self.limit, self.uid = ignored, limit, uid
        self.copied, self.entries, self.skipped = 0, 0, []

    def folder(self, fd: int, dest: str, where: str = "") -> None:
        if where.count(os.sep) >= MAX_DEPTH:
            raise RuntimeError(f"folders nested deeper than {MAX_DEPTH}")
        os.makedirs(dest, exist_ok=True)
        for name in sorted(os.listdir(fd)):
            shown = os.path.join(where, name)
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            self.entries += 1
            if self.entries > MAX_ENTRIES:
                raise RuntimeError(f"more than {MAX_ENTRIES} files and folders")
            if info.st_uid != self.uid:
                self.skipped.append(f"{shown} (not the sender's)")
            elif stat.S_ISDIR(info.st_mode) and not self.ignored(name, None):
                self._open(fd, name, shown, dest, _DIR_FLAGS, self.folder)
            elif stat.S_ISREG(info.st_mode) and not self.ignored(name, info.st_size):
                if self.copied + info.st_size > self.limit:  # a sparse file, too
                    raise RuntimeError(f"submission larger than {self.limit} bytes")
                self._open(fd, name, shown, dest, _FILE_FLAGS, self.file)
            elif not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
                self.skipped.append(f"{shown} (not a regular file or folder)")

    def _open(self, fd, name, shown, dest, flags, then) -> None:
        try:
            child = os.open(name, flags, dir_fd=fd)
        except OSError:  # a link swapped in, or gone
            self.skipped.append(f"{shown} (changed while collecting)")
            return
        try:
            if flags == _FILE_FLAGS and not stat.S_ISREG(os.fstat(child).st_mode):
                self.skipped.append(f"{shown} (not a regular file)")
                return
            then(child, os.path.join(dest, name), shown)
        finally:
            os.close(child)

    def file(self, fd: int, dest: str, where: str) -> None:
        with open(dest, "wb") as out:
            while chunk := os.read(fd, 1 << 20):
                self.copied += len(chunk)
                if self.copied > self.limit:
                    raise RuntimeError(f"submission larger than {self.limit} bytes")
                out.write(chunk)


class ReadableFeedback(ExchangeReleaseFeedback):
    """nbgrader's release of feedback, each page released readable by all
    (``0644``) whatever the instructor's umask (module docstring)."""

    def copy_files(self):
        super().copy_files()
        for page in glob.glob(os.path.join(self.dest_path, "*.html")):
            if os.lstat(page).st_uid == os.geteuid():
                os.chmod(page, 0o644)
