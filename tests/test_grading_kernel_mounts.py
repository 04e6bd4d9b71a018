"""The sandbox's file system (``course/grading/kernel/mounts.py``): a writable folder caps
the files it holds, not only their bytes."""

import shutil
import subprocess
import sys
import textwrap

import pytest

# In a user and mount namespace of its own: a writable folder of ``inodes`` files,
# filled with empty files until refused; prints how many it made.
FILL = textwrap.dedent(
    """
    import os, sys, tempfile
    from course.grading.kernel import mounts
    target = tempfile.mkdtemp()
    mounts._tmpfs(target, uid=os.getuid(), size=1 << 20, inodes=int(sys.argv[1]),
                  mode="700")
    made = 0
    for n in range(500):
        try:
            open(os.path.join(target, str(n)), "w").close()
        except OSError:
            break
        made += 1
    print(made)
    """
)


def _files(inodes: int) -> int:
    proc = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount"]
        + [sys.executable, "-c", FILL, str(inodes)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout)


@pytest.mark.skipif(shutil.which("unshare") is None, reason="util-linux's unshare")
def test_a_writable_folder_holds_at_most_its_files():
    assert 90 <= _files(100) < 100  # the folder itself is one of the hundred
    assert _files(100_000) == 500  # the control: a larger cap lets all 500 in


# In a user and mount namespace of its own: a folder holding two files and another
# file system (a tmpfs with a file); what the sandbox copies of it, as paths.
COPY = textwrap.dedent(
    """
    import os, sys, tempfile
    from pathlib import Path
    from course.grading.kernel import mounts
    origin, target = Path(tempfile.mkdtemp()), tempfile.mkdtemp()
    (origin / "data.csv").write_text("1")
    (origin / "sub").mkdir()
    (origin / "sub" / "more.txt").write_text("2")
    (origin / "other").mkdir()
    if sys.argv[1] == "mounted":
        mounts._tmpfs(str(origin / "other"), uid=0, size=1 << 20, inodes=100,
                      mode="700")
    (origin / "other" / "inside.txt").write_text("3")
    mounts._copy(str(origin), target, os.getuid())
    print(sorted(str(p.relative_to(target)) for p in Path(target).rglob("*.*")))
    """
)


def _copied(how: str) -> list[str]:
    proc = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount"]
        + [sys.executable, "-c", COPY, how],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return eval(proc.stdout)  # noqa: S307 - our own script's printed list


@pytest.mark.skipif(shutil.which("unshare") is None, reason="util-linux's unshare")
def test_the_notebook_folder_is_copied_without_entering_another_file_system():
    """A sandbox's own root lies below ``/tmp``: copying a kernel's folder there
    must not walk into it (or any other mount)."""
    assert _copied("mounted") == ["data.csv", "sub/more.txt"]
    assert _copied("plain") == ["data.csv", "other/inside.txt", "sub/more.txt"]
