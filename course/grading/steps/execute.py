"""An nbgrader ``Execute`` that keeps grading when a student's code breaks its kernel.

Stock nbgrader gives up on the whole notebook when a cell kills the kernel
(``os._exit``, a signal, a crash) or goes on running after the timeout's interrupt:
the submission reads as a plain 0. :class:`GuardedExecute` instead

* gives that cell an error output saying what happened (so it earns 0 and the
  student and instructor see why),
* starts a new kernel, replays the answer and given cells that ran before it
  (silently, without their outputs) and goes on with the next cell; after
  ``max_restarts`` restarts, or a replay that fails, it gives up and marks each
  remaining cell "not run" with the reason (as it does past its time and output
  limits);
* caps each kernel's address space (``memory_limit``), so a runaway allocation
  raises ``MemoryError`` in the student's cell instead of taking the machine down;
* runs each kernel in a sandbox (``sandbox``, :mod:`course.grading.kernel.sandbox`): an
  unprivileged user in namespaces of its own that sees only what a notebook needs;
* shuts each kernel down at once after its last cell.

It is the first of ``Autograde.autograde_preprocessors`` in ``nbgrader_config.py``,
so ``nbgrader autograde``, the formgrader and ``python -m course grade`` all use it.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

from jupyter_client.kernelspec import KernelSpec
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import ensure_async, run_sync
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Bool, Enum, Float, Integer, default

from ...checks import evidence
from ...i18n import say
from ..cells import error_output, is_test
from ..enames import DEAF, KERNEL_DIED, NOT_RUN
from ..kernel import contain, launch, sandbox
from ..kernel.inside import Policy
from ..kernel.kernels import LimitedKernelManager, PromptClient
from ..kernel.launch import Launch
from .flags import mark_truncated

TRUNCATED = "... Output truncated: the notebook printed too much ...\n"


class GuardedExecute(Execute):
    """nbgrader's ``Execute``, plus kernel restarts, a sandbox, limits and fast
    shutdown."""

    max_restarts = Integer(
        3, help="Kernel restarts per notebook before the remaining cells are not run."
    ).tag(config=True)

    memory_limit = Float(
        Policy.memory / 2**30, help="Address space per kernel, in GiB (0: no limit)."
    ).tag(config=True)
    shutdown_kernel = Enum(
        ["graceful", "immediate"],
        default_value="immediate",
        help="Kill the kernel after the last cell instead of waiting for its atexit.",
    ).tag(config=True)

    max_processes = Integer(
        Policy.processes,
        help="Processes per kernel, itself included (where a pids cgroup exists).",
    ).tag(config=True)
    notebook_timeout = Float(
        0, help="Seconds for the whole notebook; later cells are not run (0: none)."
    ).tag(config=True)
    network = Bool(
        False,
        help="Without the sandbox: let kernels use the network (off: as root, a "
        "namespace of their own).",
    ).tag(config=True)
    sandbox = Enum(
        ["on", "auto", "off"],
        default_value="on",
        help="Each kernel in a sandbox of its own (course.grading.kernel.sandbox): 'on' "
        "refuses to grade where the machine cannot; 'auto' sandboxes where it can "
        "(self-study); 'off' runs kernels as the grader.",
    ).tag(config=True)
    cpu_limit = Integer(
        Policy.cpu_seconds,
        help="Sandbox: CPU seconds per kernel, all its processes' threads.",
    ).tag(config=True)
    scratch_size = Float(
        Policy.scratch / 2**20,
        help="Sandbox: MiB of each writable folder (home, /tmp, cwd).",
    ).tag(config=True)

    max_output = Float(
        10.0, help="MiB of printed output kept per notebook; more is dropped."
    ).tag(config=True)
    stop_output = Float(
        50.0,
        help="MiB of printed output after which the kernel is stopped if it goes "
        "on printing (max_output more, in later cells): one cell's flood is only "
        "cut, and the rest of the notebook graded.",
    ).tag(config=True)

    @default("kernel_manager_class")
    def _kernel_manager_class_default(self) -> type:
        return LimitedKernelManager

    def preprocess(self, nb, resources=None, km=None):
        self._ran: list[str] = []  # sources to replay after a restart
        self._restarts = 0
        self._given_up = ""  # why the remaining cells are not run (empty: they are)
        self._printed = 0  # characters of stream output so far
        self._box: dict = {}
        self._ipc = ""
        self._truncated = False  # an output limit cut output
        self._flood_cell: int | None = None  # the cell that passed stop_output
        self._printed_after = 0  # characters printed in the cells after it
        self._sandboxed = self._use_sandbox()
        budget = self.notebook_timeout
        self._deadline = time.monotonic() + budget if budget > 0 else None
        nb, resources = super().preprocess(nb, resources, km)
        if self._truncated:
            mark_truncated(nb)
        return nb, resources

    def _use_sandbox(self) -> bool:
        """Whether kernels run in a sandbox; 'on' where none can be made raises."""
        if self.sandbox == "off":
            return False
        reason = sandbox.available()
        if reason and self.sandbox == "on":
            raise RuntimeError(sandbox.refusal(reason))
        return reason is None

    def _policy(self) -> Policy:
        """The kernel's limits, from this step's settings."""
        return Policy(
            memory=int(self.memory_limit * 2**30),
            cpu_seconds=self.cpu_limit,
            file_size=int(self.scratch_size * 2**20),
            scratch=int(self.scratch_size * 2**20),
            processes=self.max_processes,
            hidden=(os.getcwd(),),
        )

    def create_kernel_manager(self):
        """Every kernel starts through the course's kernel command, which puts it in
        its box (:mod:`course.grading.kernel.contain`) and forks it warm where it can."""
        km = super().create_kernel_manager()
        km.client_factory = PromptClient
        spec = km.kernel_spec
        command = [
            sys.executable,
            "-m",
            "course.grading.kernel.warm",
            "-f",
            "{connection_file}",
        ]
        if spec is not None and "course.grading.kernel.warm" not in spec.argv:
            km._kernel_spec = KernelSpec(
                argv=command, display_name=spec.display_name, language="python"
            )
        return km

    async def async_start_new_kernel(self, **kwargs) -> None:
        self._box = contain.open_box(self.max_processes)
        env = {**os.environ, **self._box, evidence.ENV: "1"}  # checks record evidence
        env[launch.ENV] = Launch(self._policy(), sandboxed=self._sandboxed).to_env()
        if not self._sandboxed and not self.network:
            env[contain.NO_NET_ENV] = "1"
        if self._sandboxed or not self.network:
            # No loopback shared with the grader: talk over socket files, in a
            # folder that the sandbox shows its kernel.
            self._ipc = tempfile.mkdtemp(prefix="course-kernel-")
            self.km.transport = "ipc"
            self.km.ip = os.path.join(self._ipc, "kernel")
        await super().async_start_new_kernel(env=env, **kwargs)
        self._kernel_pid = getattr(self.km.provisioner, "pid", None)

    start_new_kernel = run_sync(async_start_new_kernel)  # the sync path uses this

    async def _async_cleanup_kernel(self) -> None:
        if self.km is None:  # already stopped (output over stop_output)
            return
        process = getattr(getattr(self.km, "provisioner", None), "process", None)
        if process is not None and self.shutdown_kernel == "immediate":
            process.kill()  # and reap it: jupyter_client polls for that every 0.1 s
            process.wait()
        try:
            await super()._async_cleanup_kernel()
        finally:
            if self._box:
                pid = getattr(self, "_kernel_pid", None)
                killed = contain.close_box(self._box, pid)
                if killed > 1:
                    self.log.warning("killed %d processes the notebook left", killed)
                self._box = {}
            if self._ipc:
                shutil.rmtree(self._ipc, ignore_errors=True)
                self._ipc = ""

    _cleanup_kernel = run_sync(_async_cleanup_kernel)  # what the sync path calls

    def output(self, outs, msg, display_id, cell_index):
        if msg["msg_type"] == "stream":
            size = len(msg["content"].get("text", ""))
            self._printed += size
            if self._flood_cell is not None and cell_index != self._flood_cell:
                self._printed_after += size
            if self._printed > self.max_output * 2**20:
                self._truncated = True
                if not outs or outs[-1].get("text") != TRUNCATED:
                    outs.append(
                        NotebookNode(
                            output_type="stream", name="stdout", text=TRUNCATED
                        )
                    )
                return None
        return super().output(outs, msg, display_id, cell_index)

    def _get_timeout(self, cell):
        timeout = super()._get_timeout(cell)
        if self._deadline is None:
            return timeout
        left = max(1, int(self._deadline - time.monotonic()))
        return min(timeout, left) if timeout else left

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not cell.source.strip():
            return cell, resources
        if self._deadline is not None and time.monotonic() > self._deadline:
            self._given_up = self._given_up or (
                say(
                    "not run: the notebook used up its {notebook_timeout:g} s",
                    notebook_timeout=self.notebook_timeout,
                )
            )
        if self._given_up:
            cell.outputs = [error_output(NOT_RUN, self._given_up)]
            return cell, resources
        cell, resources = self._execute_or_restart(cell, resources, index)
        if self._flood_cell is None and self._printed > self.stop_output * 2**20:
            self._flood_cell = index  # cut; stopped only if the printing goes on
        if self._printed_after > self.max_output * 2**20 and not self._given_up:
            self._given_up = say(
                "not run: the notebook printed more than {stop_output:g} MiB",
                stop_output=self.stop_output,
            )
            run_sync(self._async_cleanup_kernel)()
        return cell, resources

    # A cell that broke its kernel: say so in its outputs, go on in a new kernel.

    def _execute_or_restart(self, cell, resources, index):
        """Run a code cell; if it broke its kernel, say so in its outputs and go on
        in a new kernel (or give up)."""
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            self._fault(
                cell,
                KERNEL_DIED,
                say(
                    "the kernel died while running this cell (os._exit, a "
                    "signal, a crash or running out of memory)"
                ),
            )
        except CellTimeoutError:
            self._fault(
                cell,
                DEAF,
                say(
                    "this cell ran longer than {timeout} s and did not stop "
                    "when interrupted",
                    timeout=self.timeout,
                ),
            )
        except Exception as err:  # noqa: BLE001 - e.g. garbled replies from a starved kernel
            self._fault(
                cell,
                KERNEL_DIED,
                say(
                    "the kernel broke while running this cell ({type_name}; "
                    "out of processes or threads?)",
                    type_name=type(err).__name__,
                ),
            )
        else:
            if not is_test(cell):
                self._ran.append(cell.source)
        return cell, resources

    def _fault(self, cell: NotebookNode, ename: str, what: str) -> None:
        self.log.warning("%s; restarting the kernel", what)
        self._restarts += 1
        if self._restarts > self.max_restarts:
            self._given_up = say(
                "not run: the kernel was restarted {max_restarts} times",
                max_restarts=self.max_restarts,
            )
            cell.outputs = [error_output(ename, what)]
            run_sync(self._async_cleanup_kernel)()
            return
        cell.outputs = [
            error_output(
                ename,
                say(
                    "{what}; the kernel was restarted and grading went on "
                    "with the next cell",
                    what=what,
                ),
            )
        ]
        if not run_sync(self._async_restart)():
            self._given_up = say("not run: the cells before it failed after a restart")

    async def _async_restart(self) -> bool:
        """A new kernel with the earlier cells replayed; False if that fails."""
        await self._async_cleanup_kernel()
        self.km = self.create_kernel_manager()
        await self.async_start_new_kernel()
        await self.async_start_new_kernel_client()
        for source in self._ran:
            msg_id = await ensure_async(
                self.kc.execute(source, silent=True, store_history=False)
            )
            try:
                if await self.async_wait_for_reply(msg_id) is None:
                    return False
            except (DeadKernelError, CellTimeoutError):
                return False
        return True
