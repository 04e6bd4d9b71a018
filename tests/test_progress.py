"""Progress: recorded in the student's own folder from the kernel's cells and
``course check``, read back after a restart, shown as a table in both languages."""

from types import SimpleNamespace

import pytest
from IPython.core.interactiveshell import InteractiveShell
from rich.console import Console

from course import cli, grading, hintbook, progress
from course import work as work_home
from course.checks import CheckFailed
from course.checks.evidence import ENV as GRADING
from course.grading.run import selfcheck
from course.i18n import with_keys

A = "05_softmax_and_scaling"
# A verdict as the checks and the grader give it: its text, and its mistake's key.
WRONG_DIM = with_keys(
    "softmax(x, dim=-1) is wrong: rows do not sum to 1 — softmax over the key dim "
    "(-1), not dim 0.",
    ["wrong-dim"],
)


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.delenv(work_home.ENV, raising=False)
    monkeypatch.setenv("COURSE_LANG", "en")
    (tmp_path / A).mkdir()
    monkeypatch.chdir(tmp_path / A)  # a kernel runs in the notebook's folder
    return tmp_path


def _cell(cell_id, error=None):
    """What IPython hands ``post_run_cell``: the cell's id and its error."""
    info = SimpleNamespace(cell_id=cell_id)
    return SimpleNamespace(info=info, error_before_exec=None, error_in_exec=error)


def _row(work, exercise):
    return next(r for r in progress.summary(work) if r["exercise"] == exercise)


def test_cells_become_events_and_states(work, capsys):
    assert _row(work, "softmax")["state"] == "not started"
    progress.on_cell(_cell("softmax"))
    assert _row(work, "softmax")["state"] == "started"
    progress.on_cell(_cell("test_softmax_rows", CheckFailed(WRONG_DIM)))
    row = _row(work, "softmax")
    assert (row["state"], row["mistake"]) == ("failing", "wrong-dim")
    assert 'check.hint("softmax")' in capsys.readouterr().out
    progress.on_cell(_cell("test_softmax_rows"))
    assert _row(work, "softmax")["state"] == "passing"
    # A hidden test's cell passes in the student's copy whatever the answer: no event.
    assert "test_softmax_random" in hintbook.book()[A]["softmax"]["hidden"]
    progress.on_cell(_cell("test_softmax_random"))
    progress.on_cell(_cell("code-03"))  # not an exercise's cell
    progress.on_cell(_cell(None))
    kinds = [e["kind"] for e in progress.Store(work).events()]
    assert kinds == ["run", "fail", "pass"]
    # A new store on the same folder (JupyterLab restarted) reads the same.
    assert (work / ".course" / "progress.sqlite").is_file()
    assert len(progress.Store(work).events(A)) == 3


def test_a_folder_that_cannot_be_written_fails_no_cell(work):
    (work / "a-file").write_text("")
    store = progress.Store(work / "a-file")  # its .course/ cannot be made
    assert store.record(A, "softmax", "run") is False
    assert store.events() == []
    assert progress.Store(work).record(A, "softmax", "run") is True


def test_time_spent_counts_gaps_up_to_a_pause(work):
    store = progress.Store(work)
    store.record(A, "softmax", "run", at=1000.0)
    store.record(A, "softmax", "fail", test="test_softmax_rows", at=1060.0)
    store.record(A, "attention_scores", "run", at=1060.0 + 3600)  # after lunch
    store.record("04_split_heads", "split_heads", "run", at=1070.0)
    store.record(A, "softmax", "pass", test="t", source="check", at=1100.0)
    assert _row(work, "softmax")["seconds"] == 60.0
    assert _row(work, "attention_scores")["seconds"] == progress.PAUSE
    assert _row(work, "split_heads")["seconds"] == 0.0


def test_the_kernel_is_watched_once_and_never_while_grading(monkeypatch):
    shell = InteractiveShell()
    monkeypatch.delenv(GRADING, raising=False)
    monkeypatch.setattr(shell, "_course_watch", False, raising=False)
    assert progress.watch(shell) is True
    assert progress.watch(shell) is False
    assert progress.on_cell in shell.events.callbacks["post_run_cell"]
    other = InteractiveShell()
    monkeypatch.setattr(other, "_course_watch", False, raising=False)
    monkeypatch.setenv(GRADING, "1")
    assert progress.watch(other) is False


def test_course_check_records_verdicts_and_suggests_a_hint(work, monkeypatch, capsys):
    notebook = work / A / f"{A}.ipynb"
    notebook.write_text("{}")
    scores = {"test_softmax_rows": (0, 1), "test_attention_scores_shape": (1, 1)}
    messages = {"test_softmax_rows": WRONG_DIM}
    monkeypatch.setattr(
        selfcheck, "grade", lambda notebooks, **k: {A: (scores, messages)}
    )
    assert cli.main(["check", str(notebook), f"--root={grading.ROOT}"]) == 1
    out = capsys.readouterr().out
    stuck = [line for line in out.splitlines() if line.startswith("Stuck")]
    assert len(stuck) == 1 and "course hint softmax" in stuck[0], out
    assert (_row(work, "softmax")["state"], _row(work, "softmax")["mistake"]) == (
        "failing",
        "wrong-dim",
    )
    assert _row(work, "attention_scores")["state"] == "passing"
    assert _row(work, "softmax")["seconds"] == 0.0  # a check is no time at the desk


@pytest.mark.parametrize(
    ("lang", "words"),
    [
        ("en", ["failing", "rows do not sum to 1"]),
        ("zh", ["未通过", "作业", "每行之和不为 1"]),
    ],
)
def test_the_views_show_every_exercise_in_the_language(work, monkeypatch, lang, words):
    monkeypatch.setenv("COURSE_LANG", lang)
    progress.Store(work).record(A, "softmax", "fail", test="t", mistake="wrong-dim")
    page = progress.page(work)
    every = [e for exercises in hintbook.book().values() for e in exercises]
    assert page.count("<tr class=") == len(every) >= 42
    assert all(w in page for w in words)
    assert "wrong-dim" not in page  # the mistake by its name, not its key
    console = Console(width=160, record=True)
    console.print(progress.table(work))
    text = console.export_text()
    assert all(w in text for w in words) and all(e in text for e in every)
    assert progress.show(work).data == page


def test_course_progress_and_course_hint_on_the_command_line(work, capsys):
    assert cli.main(["progress", f"--work={work}"]) == 0
    assert "softmax" in capsys.readouterr().out
    assert cli.main(["hint", "softmax", f"--work={work}"]) == 0
    assert "Hint 1 of 3" in capsys.readouterr().out
    assert cli.main(["hint", "nothing", f"--work={work}"]) == 2
    events = progress.Store(work).events()
    assert [(e["hint"], e["source"]) for e in events] == [("1", "cli")]
