"""nbgrader in a student's server on the course hub: the course and its exchange.

The course id is the class's edition's (``COURSE_LANG``), as the instructor's
server reads it from that edition's ``nbgrader_config.py``: a Chinese class
fetches and submits in ``attention-by-hand-zh``.
"""

import os

from course.grading.settings import COURSE_IDS
from course.i18n import language

c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = COURSE_IDS[language()]
c.Exchange.root = os.environ.get("COURSE_EXCHANGE", "/srv/nbgrader/exchange")
