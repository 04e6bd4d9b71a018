"""nbgrader's command line, told the gradebook's URL in private.

A gradebook URL may hold a password (``postgresql+psycopg://grader:PASSWORD@...``).
On a command line (``--CourseDirectory.db_url=...``) every account of the machine
reads it (``ps``, ``/proc/PID/cmdline``), students on the course hub too; a
process's environment only its own account (and root) can read. So ``course``
hands nbgrader the URL in :data:`URL_ENV` (:func:`private_url`) and starts it
through this module, whose :func:`arguments` moves it into nbgrader's arguments
inside the process, and out of the environment its kernels would inherit. A
warm nbgrader (forked by :mod:`course.grading.kernel.zygote`) gets it the same way.
"""

from __future__ import annotations

import os
import sys

#: The environment variable that carries the gradebook's URL to nbgrader.
URL_ENV = "COURSE_GRADEBOOK_URL"


def private_url(url: str | None) -> dict[str, str]:
    """The environment that tells an nbgrader started here the gradebook ``url``
    (empty for none: nbgrader's own, ``gradebook.db`` in the course folder)."""
    return {URL_ENV: url} if url else {}


def arguments(argv: list[str]) -> list[str]:
    """``argv`` with the gradebook URL this process's environment carries, which
    leaves the environment."""
    url = os.environ.pop(URL_ENV, None)
    return [*argv, f"--CourseDirectory.db_url={url}"] if url else list(argv)


def main() -> None:
    """``python -m course.grading.nbgrader_app ARGS``: ``nbgrader ARGS``."""
    from nbgrader.apps.nbgraderapp import NbGraderApp

    NbGraderApp.launch_instance(argv=arguments(sys.argv[1:]))


if __name__ == "__main__":
    main()
