"""``course``'s command line: a help page that reads, and --root on every command."""

import subprocess
import sys

from course import cli, grading

A = "01_config"


def _course(*args, cwd=None, timeout=300):
    cmd = [sys.executable, "-m", "course", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=timeout)


def test_help_lists_each_command_on_its_own_line():
    out = _course("--help").stdout
    names = ("lab", "check", "hint", "answer", "progress", "release", "grade")
    for name in (*names, "feedback", "report"):
        assert any(line.split()[:1] == [name] for line in out.splitlines()), out
    assert all(len(line) <= 88 for line in out.splitlines()), out


def test_every_command_takes_root():
    parser = cli.build_parser()
    commands = parser._subparsers._group_actions[0].choices
    assert set(commands) == {
        *("lab", "check", "hint", "answer", "progress"),
        *("release", "grade", "feedback", "report"),
    }
    for name, sub in commands.items():
        assert "--root" in sub.format_help(), name


def test_release_works_on_the_course_named_by_root(tmp_path):
    """From another folder, as after a read-only ``pip install .``."""
    root = grading.make_course(tmp_path / "course")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = _course("release", A, f"--root={root}", cwd=elsewhere)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert grading.notebook_path(root, "release", A).exists()
    assert not (elsewhere / "release").exists()


def test_check_names_a_missing_assignment(tmp_path):
    root = grading.make_course(tmp_path / "course")
    notebook = tmp_path / "99_nope.ipynb"
    notebook.write_text("{}")
    proc = _course("check", str(notebook), f"--root={root}", cwd=tmp_path)
    assert proc.returncode == 2 and "99_nope" in proc.stdout


def test_check_hands_its_options_to_the_self_check(monkeypatch, tmp_path):
    from course.grading.run import selfcheck

    seen = {}
    monkeypatch.setattr(
        selfcheck, "run", lambda notebooks, **kwargs: seen.update(kwargs) or 0
    )
    monkeypatch.chdir(tmp_path)
    assert cli.main(["check", "--fixed-seeds", "a.ipynb", "b.ipynb"]) == 0
    assert seen["fixed_seeds"] is True and seen["course"] == tmp_path
    assert cli.main(["check", "a.ipynb"]) == 0 and seen["fixed_seeds"] is False
