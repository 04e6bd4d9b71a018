"""What a sandboxed kernel gives up before it runs a line of student code: its
privileges and most system calls.

:func:`drop_privileges` makes the calling process an unprivileged user with no
capabilities, no way to gain any (``no_new_privs``) and a seccomp filter
(libseccomp, through ``pyseccomp``) that refuses the system calls no notebook needs:
debugging or reading other processes, mounting, entering or making namespaces,
kernel modules, BPF, perf events, keyrings, io_uring, clocks and reboots.
:func:`limit` sets the resource limits of the kernel process itself.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource

import pyseccomp as seccomp

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP = 1, 4, 24
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
CAP_VERSION_3 = 0x20080522

#: Refused with EPERM: what a notebook never needs and an attack does.
DENIED = (
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise",
    "pidfd_getfd", "kcmp", "mount", "umount2", "pivot_root", "chroot", "setns",
    "unshare", "mount_setattr", "move_mount", "open_tree", "fsopen", "fsconfig",
    "fsmount", "fspick", "bpf", "perf_event_open", "userfaultfd", "keyctl",
    "add_key", "request_key", "init_module", "finit_module", "delete_module",
    "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "acct",
    "quotactl", "quotactl_fd", "open_by_handle_at", "name_to_handle_at",
    "lookup_dcookie", "fanotify_init", "syslog", "settimeofday", "clock_settime",
    "clock_adjtime", "adjtimex", "iopl", "ioperm", "vhangup", "uselib",
    "personality", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "nfsservctl", "sethostname", "setdomainname", "memfd_create",
)  # fmt: skip
#: Socket families a kernel may open: Unix, IPv4, IPv6 (its own loopback), netlink.
#: Others (vsock reaches a virtual machine's host whatever the namespace) refused.
FAMILIES = (1, 2, 10, 16)
#: ``clone`` flags that make namespaces: refused like ``unshare``.
CLONE_NEW = (
    0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000,
    0x40000000, 0x00000080,
)  # fmt: skip

_libc = ctypes.CDLL(None, use_errno=True)


def prctl(option: int, arg: int = 0) -> int:
    """``prctl(2)``; raises ``OSError`` on failure."""
    if _libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")
    return 0


def die_with_parent() -> None:
    """SIGKILL the calling process when its parent dies."""
    prctl(PR_SET_PDEATHSIG, 9)


def set_dumpable(dumpable: bool) -> None:
    """Whether processes of the same user may read this one's memory through
    ``/proc`` (a change of uid turns it off)."""
    prctl(PR_SET_DUMPABLE, int(dumpable))


def drop_privileges(uid: int | None, gid: int | None) -> None:
    """Become ``uid``/``gid`` (root: a user that owns nothing; ``None``: stay the
    user of a user namespace) with no capabilities, ``no_new_privs`` and the
    seccomp filter. Irreversible."""
    for cap in range(64):  # the bounding set: nothing regained by exec either
        try:
            prctl(PR_CAPBSET_DROP, cap)
        except OSError as err:
            if err.errno == errno.EINVAL:  # past the last capability
                break
            raise
    if uid is not None:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    _clear_capabilities()
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    _filter().load()


def _clear_capabilities() -> None:
    header = (ctypes.c_uint32 * 2)(CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable x 2
    if _libc.capset(header, data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset: {os.strerror(err)}")


def _filter() -> seccomp.SyscallFilter:
    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for name in DENIED:
        _add(rules, seccomp.ERRNO(errno.EPERM), name)
    for flag in CLONE_NEW:
        _add(
            rules,
            seccomp.ERRNO(errno.EPERM),
            "clone",
            seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag),
        )
    for family in range(64):
        if family not in FAMILIES:
            for call in ("socket", "socketpair"):
                arg = seccomp.Arg(0, seccomp.EQ, family)
                _add(rules, seccomp.ERRNO(errno.EAFNOSUPPORT), call, arg)
    # clone3 passes its flags in memory, out of a filter's reach: "not implemented"
    # makes the C library fall back to clone, which is filtered.
    _add(rules, seccomp.ERRNO(errno.ENOSYS), "clone3")
    return rules


def _add(rules, action, name: str, *args) -> None:
    try:
        rules.add_rule(action, name, *args)
    except (RuntimeError, ValueError, OSError):  # a call this architecture lacks
        pass


def cap_address_space(memory: int) -> None:
    """Cap the calling process's address space at ``memory`` bytes (0: no cap):
    the memory limit of a kernel, sandboxed or not."""
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))


def processes_counted_per_namespace() -> bool:
    """Whether this Linux counts ``RLIMIT_NPROC`` per user namespace (5.14 and
    later): a cap set inside a sandbox's own user namespace then counts that
    sandbox's processes only, not the grader's, which share its uid outside."""
    release = os.uname().release.split("-")[0].split(".")
    try:
        return (int(release[0]), int(release[1])) >= (5, 14)
    except (IndexError, ValueError):
        return False


def limit(
    *, memory: int | None, cpu_seconds: int, file_size: int, processes: int | None
) -> None:
    """Resource limits of the calling process (bytes, seconds; ``None``: unchanged).

    ``processes`` caps the processes of the calling user: only for a user that
    owns nothing else (a slot's uid), or a uid in a user namespace of the sandbox's
    own where they are counted per namespace
    (:func:`processes_counted_per_namespace`).
    """
    caps = [
        (resource.RLIMIT_CPU, cpu_seconds),
        (resource.RLIMIT_FSIZE, file_size),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NOFILE, 1024),
    ]
    if processes:
        caps.append((resource.RLIMIT_NPROC, processes))
    for which, value in caps:
        resource.setrlimit(which, (value, value))
    cap_address_space(memory or 0)
