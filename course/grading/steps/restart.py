"""Keep grading a notebook whose cell kills its kernel or will not stop.

Stock nbgrader gives up on the whole notebook when a cell kills the kernel
(``os._exit``, a signal, a crash) or goes on running after the timeout's interrupt:
the submission reads as a plain 0. :class:`RestartingExecute` instead gives that
cell an error output saying what happened (so it earns 0 and the student and
instructor see why), starts a new kernel, replays the answer and given cells that
ran before it (silently, without their outputs) and goes on with the next cell.
After ``max_restarts`` restarts, or a replay that fails, it gives up: the reason
is kept, and :class:`course.grading.steps.execute.GuardedExecute` (which gives up on its
time and output limits too) marks each remaining cell "not run" with it.
"""

from __future__ import annotations

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import ensure_async, run_sync
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Integer

from ...i18n import say
from ..cells import error_output, is_test
from ..enames import DEAF, KERNEL_DIED


class RestartingExecute(Execute):
    """nbgrader's ``Execute``, plus a new kernel after a cell that broke its own."""

    max_restarts = Integer(
        3, help="Kernel restarts per notebook before the remaining cells are not run."
    ).tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        self._ran: list[str] = []  # sources to replay after a restart
        self._restarts = 0
        self._given_up = ""  # why the remaining cells are not run (empty: they are)
        return super().preprocess(nb, resources, km)

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
