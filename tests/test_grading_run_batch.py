"""``batch.grade``'s loop on an in-process dask cluster, with a stand-in task: what
the scheduler keeps of a submission once its result is collected."""

import time
from pathlib import Path

from course.grading.run import batch, cluster, engine, results
from course.grading.settings import Settings

A = "01_config"
SETTINGS = Settings(cell_timeout=5, notebook_timeout=5, sandbox="off", draw_seeds=False)
SCHEDULER = []  # the in-process cluster's scheduler, for the stand-in task


def _stand_in(job: engine.Job) -> engine.Outcome:
    """Student ``first`` returns at once; ``second`` waits (10 s at most) until the
    scheduler has forgotten ``first``, and says in its flags whether it had."""
    forgotten = job.student == "first"
    deadline = time.monotonic() + 10
    while not forgotten and time.monotonic() < deadline:
        forgotten = f"grade-{A}-first" not in SCHEDULER[0].tasks
        time.sleep(0.05)
    flags = [] if forgotten else ["the scheduler still holds first"]
    return engine.Outcome(finished=True, returncode=0, graded=False, flags=flags)


def test_a_collected_result_is_forgotten_at_once(tmp_path, monkeypatch):
    """A collected submission leaves the scheduler: if the worker holding its result
    died later, the scheduler would grade it again, after the student's line was
    written, and maybe after the run (seen in CI: a task box outliving its run)."""
    from distributed import Client, LocalCluster

    monkeypatch.setattr(engine, "grade_submission", _stand_in)
    monkeypatch.setattr(cluster, "end_run", lambda client, run: None)
    seen = []

    def result(job, outcome, flags):
        seen.append(outcome)
        return results._result(job, results.GRADED, [])

    monkeypatch.setattr(results, "_outcome_result", result)
    plan = batch.Plan(
        root=Path(tmp_path),
        db_url="sqlite://",
        todo=[(A, "first"), (A, "second")],
        results=[],
        registered=[],
    )
    with (
        LocalCluster(n_workers=2, processes=False, dashboard_address=None) as local,
        Client(local) as client,
    ):
        SCHEDULER[:] = [local.scheduler]
        batch.grade(plan, client=client, settings=SETTINGS, show_progress=False)
    assert len(seen) == 2
    assert [o.flags for o in seen] == [[], []], seen
