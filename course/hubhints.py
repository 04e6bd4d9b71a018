"""Talking to the course hub's hint service (:mod:`course.grading.hub.hintservice`).

On the course's hub a kernel finds the service's Unix socket in
``COURSE_HINT_SERVICE`` and asks it with its server's hub token; :func:`ask` is
what :func:`course.hints.hint` calls there, and :func:`call_service` what
``course grade`` reads the record with. The socket's folder is the hub user's
alone: no other account can stand in for the service and be sent the token.
"""

from __future__ import annotations

import json
import os

from .i18n import tell

SERVICE_ENV = "COURSE_HINT_SERVICE"  # the hub's hint service: its Unix socket
SERVICE_NAME = "course-hints"  # its name on the hub
SERVICE_PREFIX = f"/services/{SERVICE_NAME}/"  # its routes
TOKEN_ENV = "JUPYTERHUB_API_TOKEN"  # who asks: the student's server's token


def ask(asked: dict) -> dict:
    """The service's answer to a request for a hint (``asked``: the fields of
    :class:`course.hints.Asked`): ``{"hint": {...}, "key": ...}``; if it cannot
    be reached or answers nonsense, a hint that says so (and no key)."""
    try:
        _, body = call_service(
            os.environ[SERVICE_ENV],
            "POST",
            "hint",
            token=os.environ.get(TOKEN_ENV, ""),
            body=json.dumps(asked).encode(),
        )
        answer = json.loads(body)
        if not isinstance(answer.get("hint"), dict) or "key" not in answer:
            raise ValueError("not an answer of the hint service")
        return answer
    except (OSError, ValueError, AttributeError) as error:
        return {
            "hint": _unreachable(f"{error.__class__.__name__}: {error}"),
            "key": None,
        }


def call_service(
    socket_path: str,
    method: str,
    route: str,
    *,
    token: str,
    body: bytes | None = None,
    timeout: float = 30,
) -> tuple[int, bytes]:
    """``(status, body)`` of one HTTP request to the service's ``api/<route>``, on
    its Unix socket ``socket_path``."""
    import http.client
    import socket

    class Connection(http.client.HTTPConnection):
        def connect(self):
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(socket_path)

    conn = Connection("localhost", timeout=timeout)
    try:
        headers = {
            "Authorization": f"token {token}",
            "Content-Type": "application/json",
        }
        conn.request(method, f"{SERVICE_PREFIX}api/{route}", body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _unreachable(why: str) -> dict:
    return {
        "exercise": "",
        "title": tell("The course's hint service did not answer."),
        "text": tell("Try again in a minute; if it goes on, tell your instructor."),
        "note": why,
        "number": "",
    }
