"""The grading kernel's application: ipykernel's, which seals its sandbox's IPC
folder (:func:`course.grading.kernel.inside.seal`) once its sockets are bound and before
it runs a line of the notebook.

``python -m course.grading.kernel.kernelapp`` takes ``ipykernel_launcher``'s arguments.
"""

from __future__ import annotations

from ipykernel.kernelapp import IPKernelApp

from . import inside


class KernelApp(IPKernelApp):
    """``IPKernelApp``, sealed in its sandbox before it starts."""

    def initialize(self, argv=None) -> None:
        super().initialize(argv)
        ports = (
            self.shell_port,
            self.iopub_port,
            self.stdin_port,
            self.control_port,
            self.hb_port,
        )
        paths = [f"{self.ip}-{port}" for port in ports]  # ipykernel's IPC names
        inside.seal(paths if self.transport == "ipc" else [])


if __name__ == "__main__":
    KernelApp.launch_instance()
