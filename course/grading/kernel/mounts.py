"""The file system of a sandboxed kernel (:mod:`course.grading.kernel.sandbox`), built in
a mount namespace of its own: a tmpfs root holding read-only binds of what a
kernel reads, size-capped tmpfs folders where it writes, a few device nodes, a
fresh ``/proc``, and a minimal ``/etc``.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import stat
import struct
from pathlib import Path

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
# statvfs flags that a read-only remount of a bind must keep (a user namespace may
# not clear them), and the mount flags they stand for.
KEEP_FLAGS = {1: MS_RDONLY, 2: MS_NOSUID, 4: MS_NODEV, 8: MS_NOEXEC,
              1024: 1024, 2048: 2048, 4096: 1 << 21}  # fmt: skip
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "fonts",
       "alternatives", "mime.types")  # fmt: skip
DEVICES = ("null", "zero", "full", "random", "urandom")
TMP = ("/tmp", "/dev/shm")  # sticky and open to all, as on any machine
MAX_COPY = 64 << 20  # bytes of the notebook folder's other files copied in
MAX_FILES = 4096  # ... and how many (a writable folder holds Policy.files at most)
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}

libc = ctypes.CDLL(None, use_errno=True)


def mount(source, target, fstype, *, flags: int, data: str | None = None) -> None:
    """``mount(2)``; raises ``OSError`` naming the target."""
    args = [None if a is None else str(a).encode() for a in (source, target, fstype)]
    if libc.mount(*args, ctypes.c_ulong(flags), data and data.encode()) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def map_user(inner: int, uid: int, gid: int) -> None:
    """In a new user namespace: be ``inner`` (uid and gid) there, ``uid``/``gid``
    outside."""
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"{inner} {uid} 1")
    Path("/proc/self/gid_map").write_text(f"{inner} {gid} 1")


def build(
    staging: str,
    *,
    readonly: list[str],
    scratch: list[str],
    ipc: str | None,
    cwd: str,
    files: dict[str, bytes],
    uid: int,
    size: int,
    inodes: int,
) -> None:
    """Build the sandbox's root at ``staging`` (in this process's new mount
    namespace): the ``scratch`` folders and ``cwd`` private and empty but for the
    regular files of the host's ``cwd``; ``ipc`` bound writable."""
    mount(None, "/", None, flags=MS_REC | MS_PRIVATE)
    mount(
        "tmpfs", staging, "tmpfs", flags=MS_NOSUID | MS_NODEV, data="size=16m,mode=755"
    )
    _etc(staging, uid)
    _dev(staging)
    for path in scratch:  # first: a read-only path may lie below /tmp
        _tmpfs(
            staging + path,
            uid=uid,
            size=size,
            inodes=inodes,
            mode="1777" if path in TMP else "700",
        )
    for path in [p for p in SYSTEM if os.path.lexists(p)] + readonly:
        if os.path.islink(path) and path in SYSTEM:
            os.symlink(os.readlink(path), staging + path)
        else:
            _bind(path, staging + path, writable=False)
    _tmpfs(staging + cwd, uid=uid, size=size, inodes=inodes, mode="700")
    _copy(cwd, staging + cwd, uid)
    if ipc:  # last: it may lie below the working folder
        _bind(ipc, staging + ipc, writable=True)
    for path, data in files.items():
        os.makedirs(os.path.dirname(staging + path), exist_ok=True)
        Path(staging + path).write_bytes(data)
        os.chown(staging + path, uid, uid)
        os.chmod(staging + path, 0o400)
    os.makedirs(staging + "/proc", exist_ok=True)


def _tmpfs(target: str, *, uid: int, size: int, inodes: int, mode: str) -> None:
    """A writable folder: at most ``size`` bytes and ``inodes`` files and folders
    (an empty file costs the host's kernel about 1 KiB that no byte cap counts)."""
    os.makedirs(target, exist_ok=True)
    options = f"size={size},nr_inodes={inodes},mode={mode},uid={uid},gid={uid}"
    mount("tmpfs", target, "tmpfs", flags=MS_NOSUID | MS_NODEV, data=options)


def _bind(source: str, target: str, *, writable: bool) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        Path(target).touch()
    mount(source, target, None, flags=MS_BIND)
    _remount(target, os.statvfs(source).f_flag, writable=writable)


def seal(path: str) -> None:
    """Make the bind at ``path`` read-only (in this mount namespace only)."""
    _remount(path, os.statvfs(path).f_flag, writable=False)


def _remount(target: str, kept: int, *, writable: bool) -> None:
    """Remount the bind at ``target`` with the ``statvfs`` flags ``kept`` (a user
    namespace may not clear them), no set-uid, and read-only unless ``writable``."""
    flags = MS_BIND | MS_REMOUNT | MS_NOSUID
    for bit, flag in KEEP_FLAGS.items():
        if kept & bit:
            flags |= flag
    mount(None, target, None, flags=flags | (0 if writable else MS_RDONLY | MS_NODEV))


def _etc(staging: str, uid: int) -> None:
    etc = Path(staging, "etc")
    etc.mkdir()
    (etc / "passwd").write_text(
        f"root:x:0:0::/root:/bin/sh\nstudent:x:{uid}:{uid}::/home/student:/bin/sh\n"
    )
    (etc / "group").write_text(f"root:x:0:\nstudent:x:{uid}:\n")
    (etc / "hosts").write_text("127.0.0.1 localhost\n::1 localhost\n")
    (etc / "hostname").write_text("sandbox\n")
    (etc / "nsswitch.conf").write_text("passwd: files\ngroup: files\nhosts: files\n")
    for name in ETC:
        source = Path("/etc", name)
        if source.exists():
            _bind(str(source.resolve()), str(etc / name), writable=False)


def _dev(staging: str) -> None:
    dev = Path(staging, "dev")
    dev.mkdir()
    for name in DEVICES:
        _bind(f"/dev/{name}", str(dev / name), writable=True)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):  # fmt: skip
        os.symlink(target, dev / name)


def _copy(origin: str, target: str, uid: int) -> None:
    """Regular files of ``origin`` (no notebook, no link followed, no other file
    system entered: the sandbox's own root may lie below it), up to
    :data:`MAX_COPY` bytes and :data:`MAX_FILES` files, into ``target``."""
    left, files, device = MAX_COPY, MAX_FILES, os.lstat(origin).st_dev
    for folder, dirs, names in os.walk(origin):
        rel = os.path.relpath(folder, origin)
        dirs[:] = [d for d in dirs if _same_folder_tree(folder, d, device)]
        for name in names:
            if name.endswith(".ipynb"):
                continue
            if files == 0:
                return
            files -= 1
            try:
                flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK  # a FIFO: no wait
                fd = os.open(os.path.join(folder, name), flags)
            except OSError:
                continue
            with open(fd, "rb") as f:
                info = os.fstat(f.fileno())
                if not stat.S_ISREG(info.st_mode) or info.st_size > left:
                    continue
                left -= info.st_size
                dest = Path(target, rel, name)
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(f.read())
            os.chown(dest, uid, uid)
            os.chown(dest.parent, uid, uid)


def _same_folder_tree(folder: str, name: str, device: int) -> bool:
    """Whether ``folder/name`` is a folder, not a link, on the file system ``device``."""
    try:
        info = os.lstat(os.path.join(folder, name))
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_dev == device


def loopback_up() -> None:
    """Bring up ``lo`` in the new network namespace: the only network there is."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        up = 0x1 | 0x8 | 0x40  # IFF_UP | IFF_LOOPBACK | IFF_RUNNING
        fcntl.ioctl(sock, 0x8914, struct.pack("16sH14x", b"lo", up))  # SIOCSIFFLAGS


def enter_root(staging: str) -> None:
    """In the new PID namespace: mount its ``/proc``, make ``staging`` the root and
    drop the machine's, then make the root folder read-only."""
    mount("proc", staging + "/proc", "proc", flags=MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.chdir(staging)
    number = SYS_PIVOT_ROOT[os.uname().machine]
    if libc.syscall(number, b".", b".") != 0:  # pivot_root(".", "."), then detach
        err = ctypes.get_errno()
        raise OSError(err, f"pivot_root: {os.strerror(err)}")
    if libc.umount2(b".", MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"umount: {os.strerror(err)}")
    os.chdir("/")
    mount(None, "/", None, flags=MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
