"""The course's exchange takes submissions as data, checked with real accounts.

Two students of the machine write into nbgrader's inbound folder, as any account
can: Ana submits; Mal submits late with her files and ``timestamp.txt`` backdated
by two hours, with links to the instructor's solutions and gradebook and a
dangling one, and drops a "submission of Ana's" timed after Ana's. The
instructor's ``nbgrader collect`` (the course's ``OwnedCollect``) must keep Ana's
own, time Mal's by the exchange (late) and copy no link. The control collects the
same inbound folder with nbgrader's own collect: the forgery wins, the backdated
time holds, and the dangling link ends the collection with ``shutil.Error``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import services

from course import grading
from course.grading.hub.exchange import TIME_FORMAT

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="makes Unix accounts"),
    # every test makes and removes the same two accounts: one worker runs them all
    pytest.mark.xdist_group("exchange"),
]

ANA, MAL = "xch-ana", "xch-mal"
A01 = "01_config"
COURSE_ID = "attention-by-hand"
BIN = Path(sys.executable).parent
STOCK = "nbgrader.exchange.default.collect.ExchangeCollect"


def _submit(user: str, inbound: Path, *, name: str, when: datetime,
            extra: str = "") -> Path:  # fmt: skip
    """An inbound entry written by ``user`` in the name of ``name``: a notebook
    that says who wrote it."""
    notebook = inbound.parents[2] / f"{user}-as-{name}.ipynb"
    notebook.write_text(f'{{"who": "{user}", "named": "{name}"}}')
    notebook.chmod(0o644)
    return services.inbound_entry(user, inbound, named=name, assignment=A01,
                                  when=when, notebook=notebook, extra=extra)  # fmt: skip


@pytest.fixture
def inbound_class():
    """A course folder of root's (the instructor), an exchange, and an inbound
    folder written by two students; yields (course, exchange, due date)."""
    folder = Path(tempfile.mkdtemp(prefix="course-exchange-"))
    folder.chmod(0o755)
    with services.unix_accounts([ANA, MAL], folder / "home", "x"):
        course = grading.make_course(folder / "course")
        course.chmod(0o700)  # the instructor's, as the hub seals it
        secret = course / "source" / A01 / f"{A01}.py"
        inbound = folder / "exchange" / COURSE_ID / "inbound"
        inbound.mkdir(parents=True)
        for path in (folder / "exchange", inbound.parent):
            path.chmod(0o755)
        inbound.chmod(0o733)  # nbgrader's: anyone writes, no one lists
        now = datetime.now(UTC)
        due = now - timedelta(hours=1)
        _submit(ANA, inbound, name=ANA, when=now - timedelta(minutes=1))
        _submit(
            MAL, inbound, name=MAL, when=now - timedelta(hours=2),
            extra=f"ln -s '{secret}' answers.txt; ln -s '{course}/gradebook.db' "
                  "gradebook.db; ln -s /nonexistent/x dangling; "
                  "touch -h -d '-2 hours' * .",
        )  # fmt: skip
        _submit(MAL, inbound, name=ANA, when=now + timedelta(minutes=5))
        due_text = due.strftime("%Y-%m-%d %H:%M:%S.%f UTC")
        grading.nbgrader("db", "assignment", "add", A01, f"--duedate={due_text}",
                         root=course)  # fmt: skip
        yield course, folder / "exchange", due
    shutil.rmtree(folder, ignore_errors=True)


def _collect(course: Path, exchange: Path, *extra: str):
    return grading.nbgrader(
        "collect", A01, f"--Exchange.root={exchange}", *extra, root=course,
        check=False,
    )  # fmt: skip


def _collected(course: Path, student: str) -> Path:
    return course / "submitted" / student / A01


def test_collect_keeps_who_sent_it_when_and_no_link(inbound_class):
    course, exchange, due = inbound_class
    proc = _collect(course, exchange)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said
    ana, mal = _collected(course, ANA), _collected(course, MAL)
    # Ana's own submission, not the one Mal wrote in her name (refused, said).
    assert f'"who": "{ANA}"' in (ana / f"{A01}.ipynb").read_text()
    assert f"names {ANA} but {MAL} sent it" in said, said
    # Mal's time is the exchange's: after the due date, whatever her file says.
    sent = datetime.strptime((mal / "timestamp.txt").read_text(), TIME_FORMAT)
    assert sent.replace(tzinfo=UTC) > due, sent
    # No link followed or kept; the rest of her submission collected, and said.
    assert sorted(p.name for p in mal.iterdir()) == [
        f"{A01}.ipynb", "submission_secret.txt", "timestamp.txt",
    ]  # fmt: skip
    assert not any(p.is_symlink() for p in mal.rglob("*"))
    assert "dangling (not a regular file or folder)" in said, said
    assert "answers.txt (not a regular file or folder)" in said, said


def test_control_nbgrader_s_own_collect_is_fooled(inbound_class):
    """The defence off (nbgrader's collect): the same inbound folder fools it."""
    course, exchange, due = inbound_class
    stock = f"--ExchangeFactory.collect={STOCK}"
    proc = _collect(course, exchange, stock, f"--student={ANA}")
    said = proc.stdout + proc.stderr
    forged = (_collected(course, ANA) / f"{A01}.ipynb").read_text()
    assert f'"who": "{MAL}"' in forged, said  # the forgery collected as Ana's
    assert "cheating attempt?" in said  # (nbgrader only warned)
    proc = _collect(course, exchange, stock, f"--student={MAL}")
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "shutil.Error" in said, said  # the dangling link
    mal = _collected(course, MAL)
    assert (mal / "answers.txt").is_file()  # the link followed: her copy of it
    claimed = datetime.strptime((mal / "timestamp.txt").read_text(), TIME_FORMAT)
    assert claimed.replace(tzinfo=UTC) < due  # her backdated time believed


def test_a_broken_entry_is_refused_and_the_class_collected(inbound_class):
    """Entries that stopped nbgrader's collect for everyone (an attacker's review):
    a name that is no submission's, a ``timestamp.txt`` that is a folder, folders
    nested 40 deep, a sparse file larger than nbgrader allows."""
    course, exchange, _ = inbound_class
    inbound = exchange / COURSE_ID / "inbound"
    later = datetime.now(UTC) + timedelta(hours=3)
    services.inbound_entry(
        MAL, inbound, named=MAL, when=later, assignment=A01,
        notebook=next(inbound.parents[2].glob("*.ipynb")),
        extra="rm timestamp.txt; mkdir timestamp.txt; "
              "mkdir -p $(printf 'd/%.0s' $(seq 40)); truncate -s 200M big.bin",
    )  # fmt: skip
    subprocess.run([services.RUNUSER, "-u", MAL, "--", "mkdir",
                    str(inbound / f"{MAL}+{A01}+garbage")], check=True)  # fmt: skip
    proc = _collect(course, exchange)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said
    assert f'"who": "{ANA}"' in (_collected(course, ANA) / f"{A01}.ipynb").read_text()
    assert f"Refused {MAL}+{A01}+garbage" in said, said
    assert "larger than" in said or "nested deeper" in said, said
