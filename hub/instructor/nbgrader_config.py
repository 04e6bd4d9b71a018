"""nbgrader in the instructor's server on the course hub: course, folder, exchange.

formgrader runs in the server's process, which starts in the instructor's home, so
this file points it at the course folder and loads the course's own configuration:
its course id among the rest (``attention-by-hand``, or ``attention-by-hand-zh`` for
a Chinese class, whose ``COURSE_ROOT`` is the Chinese edition, ``zh/``).
"""

import os

c = get_config()  # noqa: F821 - provided by nbgrader

root = os.environ.get("COURSE_ROOT", os.getcwd())
if os.path.exists(os.path.join(root, "nbgrader_config.py")):
    load_subconfig(os.path.join(root, "nbgrader_config.py"))  # noqa: F821
c.CourseDirectory.root = root
c.Exchange.root = os.environ.get("COURSE_EXCHANGE", "/srv/nbgrader/exchange")
