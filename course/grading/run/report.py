"""``python -m course report``: how the class did, as CSV, PNG plots and one HTML page.

* ``grades.csv``: one row per student and assignment (autograded points, maximum);
* ``scores_<a>.png``: the distribution of total scores per assignment;
* ``cells_<a>.png``: the pass rate of each test cell;
* ``report.html``: the plots; per exercise, the most common verdicts
  (misconception messages) and how many students got each; and the submissions
  that ``course grade`` flagged or could not grade, with its reasons, for the
  instructor to review; where the course hub's hint service keeps a record, the
  hints asked per exercise (and the points they cost). Verdicts only: no test code, no solution. A warning heads
  it when the last ``course grade`` ran kernels outside the sandbox.
"""

from __future__ import annotations

import csv
import html
import json
from collections import Counter
from pathlib import Path

from ...fonts import use_cjk_fonts
from ...i18n import language, say
from ..cells import (
    error_messages,
    exercise,
    grade_id,
    is_answer,
    is_test_id,
    notebook_path,
)
from ..gradebook import cell_scores
from . import hintcharge

RUN_FILE = "grading-run.json"  # written by course grade: was the run sandboxed?
LOG_FILE = "grading.csv"  # written by course grade: what happened to each submission
REVIEW = ("flagged", "failed")  # the states the instructor should look at


def _plot_scores(totals: list[float], *, most: float, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if language() == "zh":
        use_cjk_fonts(plt)

    fig, ax = plt.subplots(figsize=(5, 3))
    ax.hist(
        totals, bins=min(20, max(5, len(set(totals)))), range=(0, most), color="#4c72b0"
    )
    xlabel = say("autograded points (of {most:g})", most=most)
    ax.set(title=title, xlabel=xlabel, ylabel=say("students"))
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _plot_cells(rates: dict[str, float], path: Path, title: str) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 0.3 * len(rates) + 1))
    names = list(rates)
    ax.barh(names, [rates[n] for n in names], color="#55a868")
    ax.invert_yaxis()
    ax.set(title=title, xlabel=say("share of students with full points"), xlim=(0, 1))
    ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _unsandboxed(out: Path) -> str:
    """A warning if the last grading run did not sandbox its kernels."""
    try:
        sandboxed = json.loads((out / RUN_FILE).read_text())["sandboxed"]
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    if sandboxed:
        return ""
    warning = say(
        "These submissions were graded without the sandbox (course grade "
        "--no-sandbox): a submission could have read or changed the course, the "
        "gradebook and other students' work while it ran."
    )
    return f"<p class='unsandboxed'><strong>{html.escape(warning)}</strong></p>"


def _answers(root: Path, assignment: str) -> list[str]:
    """The grade ids of the assignment's answer cells (its exercises)."""
    path = notebook_path(root, "source", assignment)
    if not path.exists():
        return []
    cells = json.loads(path.read_text("utf-8"))["cells"]
    return [grade_id(c) for c in cells if is_answer(c)]


def verdicts_by_exercise(
    messages: dict[str, dict[str, str]], answers: list[str]
) -> dict[str, Counter]:
    """``{exercise: Counter({verdict: students})}`` from ``{student: {test cell:
    message}}``: a student counts once per verdict of an exercise, however many of
    its test cells said it. A verdict is the message's first line, whole."""
    out: dict[str, Counter] = {}
    for cells in messages.values():
        said: dict[str, set[str]] = {}
        for cell, message in cells.items():
            first = message.splitlines()[0] if message else ""
            said.setdefault(exercise(cell, answers), set()).add(first)
        for name, lines in said.items():
            out.setdefault(name, Counter()).update(lines)
    return out


def _table(title: str, heads: list[str], rows: str) -> str:
    """A titled HTML table: its headings, then ``rows`` (``<tr>`` elements)."""
    head = "".join(f"<th>{h}</th>" for h in heads)
    return f"<h3>{title}</h3><table><tr>{head}</tr>{rows}</table>"


def _rank(name: str, order: list[str]) -> tuple[int, str]:
    return (order.index(name) if name in order else len(order), name)


def _most_common(counts: Counter, n: int = 5) -> list[tuple[str, int]]:
    """The ``n`` most common verdicts, ties in alphabetical order: the same report
    from the same verdicts, whatever order they were counted in."""
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n]


def _verdict_table(by_exercise: dict[str, Counter], order: list[str]) -> str:
    heads = [say("exercise"), say("students"), say("message")]
    rows = "".join(
        f"<tr><td>{html.escape(name)}</td><td>{n}</td><td>{html.escape(v)}</td></tr>"
        for name in sorted(by_exercise, key=lambda e: _rank(e, order))
        for v, n in _most_common(by_exercise[name])
    )
    return _table(say("Most common verdicts, by exercise"), heads, rows)


def _rows(path: Path, assignment: str) -> list[dict]:
    """The rows of one assignment in a CSV file that ``course grade`` wrote
    (none without the file, or with other columns)."""
    try:
        with open(path, newline="") as f:
            return [r for r in csv.DictReader(f) if r["assignment"] == assignment]
    except (OSError, KeyError):
        return []


def hints_by_exercise(out: Path, assignment: str) -> dict[str, tuple[int, int, float]]:
    """``{exercise: (hints, students, points charged)}`` of one assignment, from
    ``out/hints.csv`` (:func:`course.grading.run.hintcharge.write`; empty without it)."""
    found: dict[str, tuple[int, int, float]] = {}
    for r in _rows(out / hintcharge.FILE, assignment):
        hints, students, points = found.get(r["exercise"], (0, 0, 0.0))
        found[r["exercise"]] = (
            hints + int(r["hints"]),
            students + 1,
            points + float(r["charged"]),
        )
    return found


def _hint_table(out: Path, assignment: str, order: list[str]) -> str:
    """Hints asked per exercise over the class, from ``course grade``'s record
    (empty without one): which exercises needed most hints."""
    found = hints_by_exercise(out, assignment)
    if not found:
        return ""
    heads = [say("exercise"), say("hints"), say("students"), say("points charged")]
    rows = "".join(
        f"<tr><td>{html.escape(name)}</td><td>{n}</td><td>{students}</td>"
        f"<td>{points:g}</td></tr>"
        for name, (n, students, points) in sorted(
            found.items(), key=lambda item: (-item[1][0], _rank(item[0], order))
        )
    )
    return _table(say("Hints asked, by exercise"), heads, rows)


def _to_review(out: Path, assignment: str) -> str:
    """The submissions of ``assignment`` that the last ``course grade`` flagged or
    could not grade, with its reasons (empty if none, or no log)."""
    rows = [r for r in _rows(out / LOG_FILE, assignment) if r.get("status") in REVIEW]
    if not rows:
        return ""
    heads = [say("student"), say("status"), say("reasons")]
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(r[k])}</td>" for k in keys) + "</tr>"
        for r in sorted(rows, key=lambda r: (r["status"], r["student"]))
        for keys in [("student", "status", "reasons")]
    )
    return _table(say("Submissions to review"), heads, body)


def _section(*, root: Path, assignment: str, out: Path, db_url: str | None):
    """``(grades.csv rows, HTML section)`` of one assignment (None: not graded)."""
    a = assignment
    scores = cell_scores(root, a, db_url)
    if not scores:
        return None
    tests = sorted({c for cells in scores.values() for c in cells if is_test_id(c)})
    totals = {
        s: sum((cells.get(c, (0, 0))[0] or 0) for c in tests)
        for s, cells in scores.items()
    }
    most = sum(next(iter(scores.values()))[c][1] for c in tests)
    rows = [(s, a, f"{totals[s]:g}", f"{most:g}") for s in sorted(scores)]
    rates = {
        c: sum(cells[c][0] == cells[c][1] for cells in scores.values() if c in cells)
        / len(scores)
        for c in tests
    }
    graded = {s: notebook_path(root, "autograded", a, student=s) for s in scores}
    messages = {s: error_messages(p) for s, p in graded.items() if p.exists()}
    answers = _answers(root, a)
    _plot_scores(
        list(totals.values()), most=most, path=out / f"scores_{a}.png", title=a
    )
    title = say("{assignment}: pass rate per test cell", assignment=a)
    _plot_cells(rates, out / f"cells_{a}.png", title)
    mean = sum(totals.values()) / len(totals)
    summary = say(
        "{count} students, mean {mean:.1f} of {most:g}.",
        count=len(scores), mean=mean, most=most,
    )  # fmt: skip
    section = (
        f"<h2>{a}</h2><p>{summary}</p>"
        f"<img src='scores_{a}.png'> <img src='cells_{a}.png'>"
        + _verdict_table(verdicts_by_exercise(messages, answers), answers)
        + _hint_table(out, a, answers)
        + _to_review(out, a)
    )
    return rows, section


def build(
    *, root: Path, assignments: list[str], out: Path, db_url: str | None = None
) -> Path:
    """Write grades.csv, the plots and report.html into ``out``; return the page
    (scores from the gradebook at ``db_url``, default SQLite in ``root``; what
    ``course grade`` said of each submission from ``out/grading.csv``)."""
    out.mkdir(parents=True, exist_ok=True)
    rows, sections = [], []
    for a in assignments:
        done = _section(root=root, assignment=a, out=out, db_url=db_url)
        if done is not None:
            rows += done[0]
            sections.append(done[1])
    with open(out / "grades.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "assignment", "autograded_score", "autograded_max"])
        writer.writerows(rows)
    page = out / "report.html"
    title = say("Class report")
    none = say("No graded submissions.")
    body = _unsandboxed(out) + ("".join(sections) or f"<p>{none}</p>")
    page.write_text(
        f"<!DOCTYPE html><html lang='{language()}'><head><meta charset='utf-8'>"
        f"<title>{title}</title>"
        "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}td,th{padding:2px 8px;text-align:left}</style>"
        f"</head><body><h1>{title}</h1>{body}</body></html>",
        "utf-8",
    )
    return page
