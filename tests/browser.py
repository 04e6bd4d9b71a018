"""Headless Debian Chromium, driven by Playwright, with the network shut.

Every request that is not loopback, ``file:`` or ``data:`` is aborted and counted,
so a test can assert that a page drew with nothing fetched from outside.
"""

from __future__ import annotations

import contextlib
import tempfile

from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ALLOWED = (
    "file:",
    "data:",
    "blob:",
    "http://127.0.0.1",
    "http://localhost",
    "ws://127.0.0.1",
)


@contextlib.contextmanager
def browser():
    """Yield ``(context, blocked)``: a fresh browser context and its blocked URLs."""
    blocked: list[str] = []

    def route(r):
        url = r.request.url
        if url.startswith(ALLOWED):
            r.continue_()
        else:
            blocked.append(url)
            r.abort()

    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        ctx = p.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, args=FLAGS, headless=True
        )
        ctx.route("**/*", route)
        try:
            yield ctx, blocked
        finally:
            ctx.close()
