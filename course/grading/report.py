"""``python -m course report``: how the class did, as CSV, PNG plots and one HTML page.

* ``grades.csv``: one row per student and assignment (autograded points, maximum);
* ``scores_<a>.png``: the distribution of total scores per assignment;
* ``cells_<a>.png``: the pass rate of each test cell;
* ``report.html``: the plots and the most common verdicts (misconception messages),
  counted over the class. Verdicts only: no test code, no solution. A warning
  heads it when the last ``course grade`` ran kernels outside the sandbox.
"""

from __future__ import annotations

import csv
import html
import json
from collections import Counter
from pathlib import Path

from ..fonts import use_cjk_fonts
from ..i18n import language, say
from . import cell_messages, cell_scores, notebook_path

RUN_FILE = "grading-run.json"  # written by course grade: was the run sandboxed?


def _plot_scores(totals: list[float], most: float, path: Path, title: str) -> None:
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


def build(
    root: Path, assignments: list[str], out: Path, db_url: str | None = None
) -> Path:
    """Write grades.csv, the plots and report.html into ``out``; return the page
    (scores from the gradebook at ``db_url``, default SQLite in ``root``)."""
    out.mkdir(parents=True, exist_ok=True)
    rows, sections = [], []
    for a in assignments:
        scores = cell_scores(root, a, db_url)
        if not scores:
            continue
        tests = sorted(
            {c for cells in scores.values() for c in cells if c.startswith("test_")}
        )
        totals = {
            s: sum((cells.get(c, (0, 0))[0] or 0) for c in tests)
            for s, cells in scores.items()
        }
        most = sum(next(iter(scores.values()))[c][1] for c in tests)
        rows += [(s, a, f"{totals[s]:g}", f"{most:g}") for s in sorted(scores)]
        rates = {
            c: sum(
                cells[c][0] == cells[c][1] for cells in scores.values() if c in cells
            )
            / len(scores)
            for c in tests
        }
        verdicts = Counter()
        for s in scores:
            path = notebook_path(root, "autograded", a, s)
            if path.exists():
                verdicts.update(
                    m.splitlines()[0][:160] for m in cell_messages(path).values()
                )
        _plot_scores(list(totals.values()), most, out / f"scores_{a}.png", a)
        title = say("{assignment}: pass rate per test cell", assignment=a)
        _plot_cells(rates, out / f"cells_{a}.png", title)
        common = "".join(
            f"<tr><td>{n}</td><td>{html.escape(v)}</td></tr>"
            for v, n in verdicts.most_common(12)
        )
        mean = sum(totals.values()) / len(totals)
        summary = say(
            "{count} students, mean {mean:.1f} of {most:g}.",
            count=len(scores), mean=mean, most=most,
        )  # fmt: skip
        heads = [say("Most common verdicts"), say("students"), say("message")]
        sections.append(
            f"<h2>{a}</h2><p>{summary}</p>"
            f"<img src='scores_{a}.png'> <img src='cells_{a}.png'>"
            "<h3>{}</h3><table><tr><th>{}</th><th>{}</th></tr>".format(*heads)
            + f"{common}</table>"
        )
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
