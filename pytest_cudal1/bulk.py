"""A frame's large buffers as files in the controller's private tmpfs folder instead of bytes in the pipes.

A trial's inputs and outputs crossed two pipes each (worker -> controller -> worker) at 0.35-0.7 GB/s a pipe,
and moving them was most of a correctness trial (session 25, H100: 20 s of trials for a conv task). A file in
/dev/shm is written once by the sender and read once by the receiver, and the controller relays only its
name (``benchmarks/pipe_throughput.py``). The channel stays data only: a file is bytes read into a buffer.

Who owns a file: its sender makes it (``write``). The controller keeps a relayed one as a ``BulkFile``, links it
under a fresh name for each receiver (a value relayed twice is read twice) and unlinks its own name when the
``BulkFile`` is dropped. A receiver reads its name into memory of its own and unlinks it (``read``): a sender
that changes the file afterwards changes nothing the receiver holds. Only the candidate's worker, whose files
only trusted processes write, maps them instead. Anything left when the controller exits (a worker killed
before it read its file) goes with the folder; a folder a killed controller left (no exit handler ran) is
removed by the next controller that starts (``sweep``), since tmpfs files hold memory until someone does.
"""

from __future__ import annotations

import atexit
import itertools
import mmap
import os
import re
import secrets
import shutil
import stat
import tempfile
import time
import weakref

FOLDER_VAR = "CUDAL1_BULK_DIR"  # the folder, as the controller tells its workers
BULK_BYTES = 1 << 20  # buffers from this size on travel as files; smaller ones are cheaper inline
MAX_BUFFER = 64 * 1024**3
SHARED_MEMORY = "/dev/shm"
PREFIX = "cudal1-bulk-"  # then the controller's pid and a random part
STALE_S = 600.0  # a dead controller's folder untouched this long is removed (``sweep``)
NAME = re.compile(r"[0-9a-f]{1,16}-[0-9a-f]{12}-[0-9]{1,12}")
_names = itertools.count()
_token = secrets.token_hex(6)
_folder: str | None = None


class BulkError(Exception):
    """A named file is missing, of the wrong size or kind, or not readable: the sender's fault."""


def controller_folder() -> str | None:
    """The controller's folder for bulk files (made on first use, removed at exit), or None where there is no
    writable tmpfs: then every buffer goes through the pipes as before."""
    global _folder
    if _folder is None and os.path.isdir(SHARED_MEMORY) and os.access(SHARED_MEMORY, os.W_OK):
        sweep(SHARED_MEMORY)
        try:
            _folder = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=SHARED_MEMORY)
        except OSError:
            return None
        atexit.register(shutil.rmtree, _folder, True)
    return _folder


def sweep(root: str, stale_s: float = STALE_S) -> list[str]:
    """Remove this user's bulk folders whose controller is gone and that nothing touched for ``stale_s``
    seconds; returns their paths. Both conditions, since a controller in another pid namespace sharing /dev/shm
    looks dead from here, and a live one's folder changes with every file it relays."""
    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        pid = entry.name[len(PREFIX):].split("-", 1)[0]
        if not entry.name.startswith(PREFIX) or not pid.isdigit() or _alive(int(pid)):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and time.time() - info.st_mtime > stale_s:
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        pass
    return True


def fresh_name() -> str:
    return f"{os.getpid():x}-{_token}-{next(_names)}"


def write(folder: str, data: memoryview) -> str | None:
    """``data`` as a new file in ``folder``; its name, or None when it could not be written (a full or small
    /dev/shm, as in a container's 64 MB default): the caller sends those bytes inline."""
    name = fresh_name()
    path = os.path.join(folder, name)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError:
        return None
    try:
        done = 0
        while done < len(data):
            done += os.write(fd, data[done:])
        return name
    except OSError:
        _unlink(path)
        return None
    finally:
        os.close(fd)


def _checked(folder: str, name: str, length: int) -> str:
    """The path of a named file, once its name, kind and size are what the frame says."""
    if not NAME.fullmatch(name):
        raise BulkError(f"bulk file name {name[:80]!r} is not one the harness makes")
    if not 0 <= length <= MAX_BUFFER:
        raise BulkError(f"bulk file of {length} bytes")
    path = os.path.join(folder, name)
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise BulkError(f"bulk file {name}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode) or info.st_size != length:
        raise BulkError(f"bulk file {name} holds {info.st_size} bytes, the frame says {length}")
    return path


def read(folder: str, name: str, length: int, mapped: bool = False) -> bytearray | mmap.mmap:
    """The file's bytes in memory of the receiver's own, the file unlinked. ``mapped``: a private (copy-on-write)
    mapping of the file itself, no copy; only for files a trusted process wrote (the candidate's worker receives
    nothing else), as a writer that cut its file short later would fault the reader (SIGBUS)."""
    path = _checked(folder, name, length)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise BulkError(f"bulk file {name}: {exc.strerror}") from None
    try:
        if os.fstat(fd).st_size != length:
            raise BulkError(f"bulk file {name} changed after it was sent")
        if mapped and length:
            return mmap.mmap(fd, length, access=mmap.ACCESS_COPY)
        buf = mmap.mmap(-1, length) if length else bytearray()
        view, got = memoryview(buf), 0
        while got < length:
            n = os.readv(fd, [view[got:]])
            if not n:
                raise BulkError(f"bulk file {name} ended after {got} of {length} bytes (changed after it was sent)")
            got += n
        return buf
    except (OSError, MemoryError) as exc:
        raise BulkError(f"bulk file {name}: {exc}") from None
    finally:
        os.close(fd)
        _unlink(path)


class BulkFile:
    """A relayed buffer the controller holds as a file it does not read: ``link`` gives each receiver its own
    name; the controller's name is unlinked when this object is dropped."""

    def __init__(self, folder: str, name: str, length: int) -> None:
        self.path = _checked(folder, name, length)
        self.folder = folder
        self.length = length
        weakref.finalize(self, _unlink, self.path)

    def __len__(self) -> int:
        return self.length

    def link(self) -> str:
        """A fresh name for the same file, for one receiver to read and unlink."""
        name = fresh_name()
        try:
            os.link(self.path, os.path.join(self.folder, name))
        except OSError as exc:
            raise BulkError(f"relaying {os.path.basename(self.path)}: {exc.strerror}") from None
        return name

    def read(self) -> bytearray | mmap.mmap:
        """The bytes, for the controller itself to decode (the controller's name stays until the object goes)."""
        return read(self.folder, self.link(), self.length)


def discard(folder: str, name: str) -> None:
    """Unlink a named file the receiver will not read (another file of its frame was bad)."""
    if NAME.fullmatch(name):
        _unlink(os.path.join(folder, name))


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
