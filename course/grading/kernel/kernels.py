"""The grader's end of a kernel's connection: a client ready at the kernel's first
answer, and ZeroMQ sockets that refuse oversized messages."""

from __future__ import annotations

import queue
import time

import zmq
import zmq.asyncio
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from traitlets import default


class PromptClient(AsyncKernelClient):
    """jupyter_client's kernel client, ready as soon as the kernel has answered.

    Stock ``wait_for_ready`` then waits for IOPub to stay quiet for 0.2 s, time in
    which the worker's core idles, once per notebook. Nothing needs that: nbclient
    takes only the outputs whose parent is the cell it runs.
    """

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout or float("inf"))
        while True:
            self.kernel_info()
            try:
                reply = await self.shell_channel.get_msg(timeout=1)
            except queue.Empty:
                reply = {"msg_type": None}
            if reply["msg_type"] == "kernel_info_reply":
                try:
                    await self.iopub_channel.get_msg(timeout=0.2)  # IOPub is up
                except queue.Empty:
                    pass
                else:
                    self._handle_kernel_info_reply(reply)
                    return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout} seconds")


MAX_MESSAGE = 512 << 20  # bytes of one message from a kernel (its evidence included)


class LimitedContext(zmq.asyncio.Context):
    """ZeroMQ sockets that refuse a message over :data:`MAX_MESSAGE` bytes: a kernel
    cannot make the grader hold a 10 GB output (ZeroMQ drops it and the peer; the
    cell then runs into its timeout)."""

    def socket(self, socket_type, **kwargs):
        sock = super().socket(socket_type, **kwargs)
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE)
        return sock


class LimitedKernelManager(AsyncKernelManager):
    """jupyter_client's kernel manager, with a :class:`LimitedContext`."""

    @default("context")
    def _context_default(self) -> zmq.asyncio.Context:
        self._created_context = True  # so that cleanup destroys it
        return LimitedContext()
