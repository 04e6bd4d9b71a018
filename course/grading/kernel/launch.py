"""How one grading kernel starts: one :class:`Launch`, and one :func:`become_kernel`.

``GuardedExecute`` decides everything a kernel starts with (its limits, whether it
is sandboxed) as one frozen :class:`Launch` and hands it to the kernel command in
one variable, :data:`ENV`. The kernel command (:mod:`course.grading.kernel.warm`)
passes it on unchanged: to a child forked from the zygote (warm), or to itself
(cold). Either way the process that becomes the kernel calls :func:`become_kernel`
(its environment, its box, then its sandbox or, without one, its memory cap) and
:func:`run_kernel` (ipykernel, sealed in its sandbox once its sockets are bound).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
from dataclasses import asdict, dataclass, field
from typing import NoReturn

from ..environment import kernel_env
from . import contain, lockdown, sandbox
from .inside import Policy

ENV = "COURSE_KERNEL_LAUNCH"  # a Launch, as JSON: set by GuardedExecute


@dataclass(frozen=True)
class Launch:
    """Everything one kernel is started with.

    Parameters
    ----------
    policy : Policy
        Its limits. In a sandbox all of them apply; without one, only
        ``policy.memory``, as the kernel's address-space cap.
    sandboxed : bool
        Whether it runs in a sandbox of its own (:mod:`.sandbox`).
    """

    policy: Policy = field(default_factory=Policy)
    sandboxed: bool = False

    def to_env(self) -> str:
        """The launch as the value of :data:`ENV`."""
        return json.dumps({"policy": asdict(self.policy), "sandboxed": self.sandboxed})

    @classmethod
    def from_env(cls, text: str | None) -> Launch:
        """The launch :meth:`to_env` wrote; the default one if ``text`` is empty."""
        if not text:
            return cls()
        fields = json.loads(text)
        policy = {**fields["policy"], "hidden": tuple(fields["policy"]["hidden"])}
        return cls(policy=Policy(**policy), sandboxed=fields["sandboxed"])

    def environment(self, env: dict | os._Environ) -> dict[str, str]:
        """The kernel's environment, made from its asker's ``env``: in a sandbox
        :func:`course.grading.environment.kernel_env`; without one, ``env`` less
        the launch itself."""
        if self.sandboxed:
            return kernel_env(env)
        return {k: v for k, v in env.items() if k != ENV}


def become_kernel(
    launch: Launch, *, argv: list[str], cwd: str, box: dict, asker=None
) -> list[str]:
    """Make the calling process the kernel ``launch`` describes, before any of
    its code runs: its environment, its box (``box``,
    :mod:`course.grading.kernel.contain`), then its sandbox, or without one its
    address-space cap.

    Returns ``argv`` as the kernel must be started with it. In a sandbox the
    calling process (single-threaded) stays outside as its keeper and never
    returns; it ends the sandbox when ``asker`` (a socket), if given, closes.
    """
    env = launch.environment(os.environ)
    os.environ.clear()
    os.environ.update(env)
    contain.enter_box(box)
    if not launch.sandboxed:
        lockdown.cap_address_space(launch.policy.memory)
        return argv
    return sandbox.enter(launch.policy, argv=argv, cwd=cwd, asker=asker)


def run_kernel(argv: list[str], *, forked: bool) -> NoReturn:
    """Run ipykernel as the kernel (:mod:`.kernelapp`): in this process if it was
    ``forked`` from the zygote (with fresh random seeds, as a new process has),
    else in a fresh interpreter that keeps nothing of the kernel command's memory."""
    if not forked:
        app = [sys.executable, "-m", "course.grading.kernel.kernelapp"]
        os.execv(sys.executable, app + argv)
    import numpy
    import torch

    torch.seed()
    random.seed()
    numpy.random.seed()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from .kernelapp import KernelApp

    argv = list(argv)
    if os.environ.get("JPY_PARENT_PID"):  # read at import in a cold kernel
        argv.append(f"--IPKernelApp.parent_handle={os.environ['JPY_PARENT_PID']}")
    KernelApp.launch_instance(argv=argv)
    os._exit(0)
