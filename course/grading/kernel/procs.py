"""What ``/proc`` tells of this machine's processes (Linux): whether one still
runs, when it started, which processes it started, and how many threads a user
runs.

:mod:`course.grading.kernel.contain` asks it what a notebook left running, and whether a
task box's worker is still the process that made it.
"""

from __future__ import annotations

import os
from pathlib import Path

PF_EXITING = 0x4  # /proc/PID/stat flags: the process has begun to exit


def started(pid: int) -> int:
    """When process ``pid`` started (clock ticks after boot); -1 if it is gone."""
    fields = _stat(pid)
    return int(fields[19]) if fields else -1  # field 22, starttime


def _stat(pid: int | str) -> list[str] | None:
    """``/proc/PID/stat`` after the command name: state, ppid, pgrp, ... (None if
    the process is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()


def running(pid: int) -> bool:
    """Running: neither gone, nor exiting, nor a zombie not reaped yet.

    A SIGKILLed process keeps its pid while the kernel tears it down (seconds, for
    one holding a model); it counts as gone from the moment it starts exiting.
    """
    fields = _stat(pid)  # state, ppid, pgrp, ..., flags
    return bool(fields) and fields[0] not in "ZXx" and not int(fields[6]) & PF_EXITING


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` in the process tree."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        fields = _stat(entry.name) if entry.name.isdigit() else None
        if fields:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def user_threads() -> int:
    """How many threads the calling process's real user runs now."""
    uid, count = str(os.getuid()), 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text().splitlines()
            except OSError:
                continue
            fields = dict(line.split(":", 1) for line in status if ":" in line)
            if fields.get("Uid", "").split()[:1] == [uid]:
                count += int(fields.get("Threads", "1"))
    return count
