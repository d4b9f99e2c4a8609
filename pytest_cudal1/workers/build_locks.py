"""torch's extension build lock, taken over when the process that holds it is dead.

``torch.utils.cpp_extension`` serialises the builds of one extension folder with a ``FileBaton``: an empty
``lock`` file created with ``O_EXCL`` and removed when the build ends. A process killed mid-build leaves the
file behind. That happens to a worker past its timeout, or in a run stopped with Ctrl-C. Every later build of
that folder then waits on the file forever. CUDA-L1's L2/35 (release line 135) compiles with
``cpp_extension.load`` at import. A run cut short during that compile left its lock, and the next run's
worker waited 200 s on it, towards a TIMEOUT that would have been charged to the candidate.

``install`` runs in the candidate worker before any candidate code. From then on the baton writes its
holder's pid into the file. A lock whose holder is gone is removed under an ``flock``, so exactly one process
takes it over. So is an empty lock older than ``EMPTY_GRACE_S``: one from a process without this patch,
such as an earlier version of the harness.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from typing import Any

EMPTY_GRACE_S = 10.0  # a patched holder writes its pid while it holds the guard, so only unpatched ones are empty


@contextlib.contextmanager
def _guard(lock_path: str) -> Iterator[None]:
    """Serialises takeovers and acquisitions of one lock; the kernel releases it when its holder dies."""
    with open(f"{lock_path}.guard", "a") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        yield


def holder_gone(lock_path: str) -> bool:
    """Whether the lock file exists and no live process holds it."""
    try:
        with open(lock_path, "rb") as f:
            text = f.read().strip()
        age = time.time() - os.stat(lock_path).st_mtime
    except FileNotFoundError:
        return False
    if not text.isdigit():
        return age > EMPTY_GRACE_S
    try:
        os.kill(int(text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, someone else's
        return False
    return False


def _remove_if_abandoned(lock_path: str) -> bool:
    if not holder_gone(lock_path):
        return False
    with contextlib.suppress(FileNotFoundError):
        os.unlink(lock_path)
    return True


def install() -> None:
    """Patch ``FileBaton`` so that an abandoned lock is taken over instead of waited on forever."""
    from torch.utils.file_baton import FileBaton

    if getattr(FileBaton.try_acquire, "takes_over_abandoned", False):
        return

    def try_acquire(self: Any) -> bool:
        with _guard(self.lock_file_path):
            _remove_if_abandoned(self.lock_file_path)
            try:
                self.fd = os.open(self.lock_file_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return False
            os.write(self.fd, str(os.getpid()).encode())
        return True

    def wait(self: Any) -> None:
        # The holder's death ends the wait as its release would: torch then imports what it finished, or says
        # that the module is missing. It does not block.
        while os.path.exists(self.lock_file_path):
            with _guard(self.lock_file_path):
                if _remove_if_abandoned(self.lock_file_path):
                    return
            time.sleep(self.wait_seconds)

    try_acquire.takes_over_abandoned = True  # type: ignore[attr-defined]
    FileBaton.try_acquire, FileBaton.wait = try_acquire, wait
