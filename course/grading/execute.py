"""An nbgrader ``Execute`` that keeps grading when a student's code breaks its kernel.

Stock nbgrader gives up on the whole notebook when a cell kills the kernel
(``os._exit``, a signal, a crash) or goes on running after the timeout's interrupt:
the submission reads as a plain 0. :class:`GuardedExecute` instead

* gives that cell an error output saying what happened (so it earns 0 and the
  student and instructor see why),
* starts a new kernel, replays the answer and given cells that ran before it
  (silently, without their outputs) and goes on with the next cell;
* caps each kernel's address space (``memory_limit``), so a runaway allocation
  raises ``MemoryError`` in the student's cell instead of taking the machine down;
* shuts each kernel down at once after its last cell.

It is the first of ``Autograde.autograde_preprocessors`` in ``nbgrader_config.py``,
so ``nbgrader autograde``, the formgrader and ``python -m course grade`` all use it.
"""

from __future__ import annotations

import os
import resource

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import ensure_async, run_sync
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Enum, Float, Integer

from .warm import MEMORY_ENV

KERNEL_DIED = "KernelDied"
DEAF = "CellTimeoutError"
NOT_RUN = "NotRun"


def error_output(ename: str, evalue: str) -> NotebookNode:
    """An ``error`` output, as a kernel would send it."""
    return NotebookNode(
        output_type="error",
        ename=ename,
        evalue=evalue,
        traceback=[f"{ename}: {evalue}"],
    )


def is_test_cell(cell: NotebookNode) -> bool:
    """A locked, graded code cell: the tests, restored from the release."""
    meta = cell.metadata.get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution")


class GuardedExecute(Execute):
    """nbgrader's ``Execute``, plus kernel restarts, a memory cap and fast shutdown."""

    memory_limit = Float(
        4.0, help="Address space per kernel, in GiB (0: no limit)."
    ).tag(config=True)
    max_restarts = Integer(
        3, help="Kernel restarts per notebook before the remaining cells are not run."
    ).tag(config=True)
    shutdown_kernel = Enum(
        ["graceful", "immediate"],
        default_value="immediate",
        help="Kill the kernel after the last cell instead of waiting for its atexit.",
    ).tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        self._ran: list[str] = []  # sources to replay after a restart
        self._restarts = 0
        self._given_up = ""
        return super().preprocess(nb, resources, km)

    async def async_start_new_kernel(self, **kwargs) -> None:
        limit = int(self.memory_limit * 2**30)
        if limit > 0:  # a warm kernel (course.grading.warm) sets it on itself
            os.environ[MEMORY_ENV] = str(limit)
        await super().async_start_new_kernel(**kwargs)
        pid = getattr(self.km.provisioner, "pid", None)
        if limit > 0 and pid:
            resource.prlimit(pid, resource.RLIMIT_AS, (limit, limit))

    start_new_kernel = run_sync(async_start_new_kernel)  # the sync path uses this

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not cell.source.strip():
            return cell, resources
        if self._given_up:
            cell.outputs = [error_output(NOT_RUN, self._given_up)]
            return cell, resources
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            self._fault(
                cell,
                KERNEL_DIED,
                "the kernel died while running this cell (os._exit, a signal, "
                "a crash or running out of memory)",
            )
        except CellTimeoutError:
            self._fault(
                cell,
                DEAF,
                f"this cell ran longer than {self.timeout} s and did not stop "
                "when interrupted",
            )
        else:
            if not is_test_cell(cell):
                self._ran.append(cell.source)
        return cell, resources

    def _fault(self, cell: NotebookNode, ename: str, what: str) -> None:
        self.log.warning("%s; restarting the kernel", what)
        self._restarts += 1
        if self._restarts > self.max_restarts:
            self._given_up = (
                f"not run: the kernel was restarted {self.max_restarts} times"
            )
            cell.outputs = [error_output(ename, what)]
            run_sync(self._async_cleanup_kernel)()
            return
        cell.outputs = [
            error_output(
                ename,
                f"{what}; the kernel was restarted and grading went on with the "
                "next cell",
            )
        ]
        if not run_sync(self._async_restart)():
            self._given_up = "not run: the cells before it failed after a restart"

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
