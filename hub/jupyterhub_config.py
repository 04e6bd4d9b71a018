"""JupyterHub for the course on one machine: ``make hub`` starts it.

Who is who (environment variables, read when the hub starts):

* ``COURSE_INSTRUCTORS``: Unix accounts that get formgrader and the ``course``
  commands, in the course folder ``COURSE_ROOT`` (default: this project).
* ``COURSE_STUDENTS``: Unix accounts that may log in as students (default: any
  account of the machine that PAM accepts). A student's server starts in their home
  folder with the Assignment List and Validate, and no instructor tools.
* ``COURSE_EXCHANGE``: nbgrader's exchange, a folder every account can write
  (default ``/srv/nbgrader/exchange``).
* ``COURSE_LANG``: the class's language, ``en`` (default) or ``zh``: verdicts in
  every server, and JupyterLab's menus (the zh-CN language pack). A Chinese class
  also sets ``COURSE_ROOT`` to the Chinese edition, ``zh/``.
* ``COURSE_HINT_SOCKET``: the Unix socket of the hint service, ``course-hints``
  (default ``/run/course-hints/hints.sock``; its folder is the hub user's, 0755):
  it serves every hint of the class and keeps the record of who asked which
  (``hub/state/hints.sqlite``), by the policy in the course's
  ``nbgrader_config.py`` (``c.HintPolicy``); ``course grade`` reads it back.
* ``OMP_NUM_THREADS``: torch threads per kernel (default 1: the class shares the
  machine's cores).

Logging in: JupyterHub's default, PAM, so each student is an account of this
machine, and nbgrader's exchange knows a submission by its Unix owner. A university
switches ``c.JupyterHub.authenticator_class`` to its own (``oauthenticator``'s
GenericOAuthenticator for a campus single sign-on, ``ldapauthenticator`` for LDAP);
docs/classroom.md shows both, and the Kubernetes set-up.
"""

import os
import sys
from pathlib import Path

from course import hubhints
from course.grading.environment import TEMPLATES, threads
from course.grading.hub import hintservice, private
from course.grading.settings import hint_policy
from course.i18n import lab_settings, language

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent  # the course's virtual environment
COURSE_ROOT = Path(os.environ.get("COURSE_ROOT", HERE.parent)).resolve()
EXCHANGE = os.environ.get("COURSE_EXCHANGE", "/srv/nbgrader/exchange")
STATE = Path(os.environ.get("COURSE_HUB_STATE", HERE / "state"))
LANG = language()


def _names(variable: str) -> set[str]:
    return set(os.environ.get(variable, "").replace(",", " ").split())


INSTRUCTORS, STUDENTS = _names("COURSE_INSTRUCTORS"), _names("COURSE_STUDENTS")

c = get_config()  # noqa: F821 - provided by JupyterHub

# Where it listens: loopback unless told (a classroom puts HTTPS in front).
c.JupyterHub.ip = os.environ.get("COURSE_HUB_IP", "127.0.0.1")
c.JupyterHub.port = int(os.environ.get("COURSE_HUB_PORT", "8000"))
c.JupyterHub.hub_port = int(os.environ.get("COURSE_HUB_API_PORT", "8081"))
proxy_api = int(os.environ.get("COURSE_PROXY_API_PORT", "8001"))
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{proxy_api}"
# The proxy is an npm package that `make hub` installs into hub/node_modules.
c.ConfigurableHTTPProxy.command = [
    str(HERE / "node_modules" / ".bin" / "configurable-http-proxy")
]
STATE.mkdir(parents=True, exist_ok=True)
# Every account runs the course's Python from this project: what is the instructor's
# alone (solutions, hidden tests, the tests' answers, the class's work, the hints'
# texts, this state) is made private from students as the hub starts; the folders
# of the class's work are made first, so that what is written into them later is
# private too.
private.make_work_folders(project=HERE.parent, course_root=COURSE_ROOT)
_secrets = private.secrets(
    project=HERE.parent,
    course_root=COURSE_ROOT,
    state=STATE,
    worked_answers=hint_policy(COURSE_ROOT).worked_answers,
)
for _path in private.seal(_secrets):
    print(f"course hub: {_path} made private from students", file=sys.stderr)
for _account in sorted(INSTRUCTORS | STUDENTS):  # and as each server starts
    if private.keep_home_private(_account):
        print(f"course hub: {_account}'s home made private", file=sys.stderr)
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.ConfigurableHTTPProxy.pid_file = str(STATE / "proxy.pid")

c.JupyterHub.authenticator_class = "pam"
c.Authenticator.admin_users = INSTRUCTORS
if STUDENTS:
    c.Authenticator.allowed_users = INSTRUCTORS | STUDENTS
else:
    c.Authenticator.allow_all = True

# Every single-user server runs in the course's environment, as its user, and
# whatever it (or a kernel, a terminal, nbgrader) makes is its user's alone: no
# student reads a classmate's answers, no one the instructor's collected work.
c.Spawner.cmd = [str(BIN / "jupyterhub-singleuser")]
c.LocalProcessSpawner.popen_kwargs = {"umask": 0o077}
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 120  # a loaded two-core machine starts a server slowly
c.Spawner.http_timeout = 120
if LANG != "en":  # JupyterLab's menus in the class's language
    c.Spawner.args = [f"--LabApp.app_settings_dir={lab_settings(LANG)}"]


# The hint service (course/grading/hub/hintservice.py), run by the hub as its user, on
# a Unix socket in a folder no other account can write: none can stand in for it.
# Kernels ask it with their server's token, which may reach it and nothing more.
HINT_SOCKET = Path(os.environ.get("COURSE_HINT_SOCKET", "/run/course-hints/hints.sock"))
HINT_SOCKET.parent.mkdir(parents=True, exist_ok=True)
HINT_SOCKET.parent.chmod(0o755)
if HINT_SOCKET.parent.stat().st_uid != os.getuid():
    raise SystemExit(f"{HINT_SOCKET.parent} must be the hub user's own folder")
c.JupyterHub.services = [
    {
        "name": hintservice.NAME,
        "command": [sys.executable, "-m", "course.grading.hub.hintservice"],
        "environment": {
            "COURSE_ROOT": str(COURSE_ROOT),
            "COURSE_LANG": LANG,
            "COURSE_INSTRUCTORS": " ".join(sorted(INSTRUCTORS)),
            "PATH": f"{BIN}{os.pathsep}/usr/bin:/bin",
            hintservice.RECORD_ENV: str(STATE / "hints.sqlite"),
            hintservice.SOCKET_ENV: str(HINT_SOCKET),
        },
    }
]
c.JupyterHub.load_roles = [  # every user may reach it (the default role, plus it)
    {"name": "user", "scopes": ["self", f"access:services!service={hintservice.NAME}"]}
]
c.Spawner.server_token_scopes = [
    "users:activity!user",
    "access:servers!server",
    f"access:services!service={hintservice.NAME}",
]


def course_roles(spawner) -> None:
    """Instructor or student: their Jupyter configuration, folder and exchange;
    their home private to them (``useradd`` on Debian makes it 0755)."""
    role = "instructor" if spawner.user.name in INSTRUCTORS else "student"
    private.keep_home_private(spawner.user.name)
    spawner.environment.update(
        {
            "JUPYTER_CONFIG_PATH": str(HERE / role),
            "JUPYTER_PATH": TEMPLATES,  # nbconvert's MathJax from the server, not a CDN
            "COURSE_EXCHANGE": EXCHANGE,
            "COURSE_LANG": LANG,  # the checks' verdicts
            hubhints.SERVICE_ENV: str(HINT_SOCKET),
            # One torch thread per kernel (unless OMP_NUM_THREADS says otherwise):
            # a class shares the cores.
            **threads(os.environ),
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        }
    )
    if role == "instructor":
        spawner.notebook_dir = str(COURSE_ROOT)
        spawner.environment["COURSE_ROOT"] = str(COURSE_ROOT)


c.Spawner.pre_spawn_hook = course_roles
