"""Headless Debian Chromium, driven by Playwright, with the network shut.

Every request that is not loopback, ``file:`` or ``data:`` is aborted and counted,
so a test can assert that a page drew with nothing fetched from outside.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
import time
import warnings

from playwright.sync_api import TimeoutError as PlaywrightTimeout
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


def hub_login(page, url: str, user: str, password: str) -> None:
    """Log ``user`` in to the JupyterHub at ``url`` and wait for JupyterLab."""
    page.goto(f"{url}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", password)
    page.click("#login_submit")
    page.wait_for_selector(".jp-LabShell", timeout=180000)


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


def cell(page, index: int):
    """The notebook's cell ``index`` (from 0)."""
    return page.locator(".jp-Notebook .jp-Cell").nth(index)


PROMPT = """([index, before, done]) => {
  const p = document.querySelectorAll('.jp-Notebook .jp-Cell')[index]
    .querySelector('.jp-InputPrompt').innerText;
  return p !== before && (!done || /[0-9]/.test(p));
}"""


SELECT_KERNEL = ("Select Kernel", "选择内核")  # the dialog's title, en and zh-CN
IDLE = ".jp-Notebook-ExecutionIndicator[data-status='idle']"


def _dismiss_dialog(page, shots, index: int) -> None:
    """Accept JupyterLab's "Select Kernel" dialog, Python 3 chosen, with a warning
    that quotes it: on a loaded machine JupyterLab can open a notebook before its
    list of kernels has come, ask, and swallow every click meanwhile. Any other
    dialog fails the test with its words (and a screenshot in ``shots``)."""
    dialog = page.locator(".jp-Dialog")
    if not (dialog.count() and dialog.first.is_visible()):
        return
    if shots is not None:
        page.screenshot(path=str(shots / f"dialog-at-cell-{index}.png"))
    words = dialog.first.inner_text().replace("\n", " / ")
    title = dialog.first.locator(".jp-Dialog-header").inner_text().strip()
    assert title in SELECT_KERNEL, f"a dialog covers the notebook: {words}"
    warnings.warn(f"accepted a JupyterLab dialog: {words}", stacklevel=3)
    dialog.first.locator("button.jp-mod-accept").click(timeout=10000)
    dialog.first.wait_for(state="detached", timeout=10000)
    page.wait_for_selector(IDLE, timeout=120000)  # the kernel chosen, started


def _start(page, prompt, index: int, before: str, shots) -> None:
    """Select the cell and press Shift+Enter until its prompt changes ([*] or a
    count): the first keystroke can come before the notebook takes keys, or a
    dialog can take it (:func:`_dismiss_dialog`)."""
    for _ in range(10):
        _dismiss_dialog(page, shots, index)
        try:
            prompt.click(timeout=10000)
        except PlaywrightTimeout:  # a dialog came up meanwhile: again
            continue
        page.keyboard.press("Shift+Enter")
        try:
            page.wait_for_function(PROMPT, arg=[index, before, False], timeout=5000)
            return
        except PlaywrightTimeout:  # not started: ask again
            continue


def run_cell(
    page, index: int, expect: str = "", timeout: float = 120000, shots=None
) -> str:
    """Run one cell and wait until its prompt shows a new execution count; return
    its output's text, which must hold ``expect`` (if not, a screenshot goes to the
    folder ``shots``). A run JupyterLab dropped (its prompt blank again: it had no
    kernel yet, and asked for one) is started again."""
    prompt = cell(page, index).locator(".jp-InputPrompt")
    before = prompt.inner_text()
    deadline = time.monotonic() + timeout / 1000
    _start(page, prompt, index, before, shots)
    while True:
        try:
            page.wait_for_function(PROMPT, arg=[index, before, True], timeout=5000)
            break
        except PlaywrightTimeout:
            if time.monotonic() > deadline:
                if shots is not None:
                    page.screenshot(path=str(shots / f"not-done-cell-{index}.png"))
                raise
        _dismiss_dialog(page, shots, index)
        if not re.search(r"[0-9*]", prompt.inner_text()):  # dropped: run it again
            warnings.warn(f"cell {index} was dropped: run again", stacklevel=2)
            _start(page, prompt, index, prompt.inner_text(), shots)
    cell(page, index).scroll_into_view_if_needed()  # drawn: inner_text reads it
    out = cell(page, index).locator(".jp-OutputArea")
    if not expect:
        return out.inner_text()
    try:
        out.filter(has_text=expect).wait_for(timeout=30000)
        # has_text reads the DOM's text; what is drawn (inner_text) can lag behind
        # it on a loaded machine, with an output still being laid out
        page.wait_for_function(
            "([i, e]) => document.querySelectorAll('.jp-Notebook .jp-Cell')[i]"
            ".querySelector('.jp-OutputArea').innerText.includes(e)",
            arg=[index, expect],
            timeout=30000,
        )
    except Exception:
        if shots is not None:
            page.screenshot(path=str(shots / f"failed-at-cell-{index}.png"))
        raise
    return out.inner_text()
