"""nbgrader in a student's server on the course hub: the course and its exchange."""

import os

c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = "attention-by-hand"
c.Exchange.root = os.environ.get("COURSE_EXCHANGE", "/srv/nbgrader/exchange")
