"""The reference worker's computed trials, kept for the task's next candidates.

A task's trial recipes are drawn once per run (``Judge.trial_secret``), so every candidate of the
task meets the same recipes; the reference worker, reused by consecutive candidates of a task,
computes each recipe's inputs and float64 output once and serves them again from here.
The cache is bounded by bytes and evicts the least recently used trial; a trial larger than a
quarter of the bound is never kept (it would push out everything else for one entry).
"""

from __future__ import annotations

import collections
import os
from typing import Generic, Hashable, TypeVar

# Bytes the cache may hold (a tuning knob: the worker's host memory, as CUDA trials are kept on the host).
BYTES_VAR = "CUDAL1_TRIAL_CACHE_BYTES"
DEFAULT_BYTES = 2 << 30  # the least bound
HOST_SHARE = 8  # else this share of the host memory available when the worker starts, where that is more

V = TypeVar("V")


def bound_from_env() -> int:
    """``CUDAL1_TRIAL_CACHE_BYTES`` if set (0 turns the cache off), else an eighth of the host's available memory,
    at least ``DEFAULT_BYTES``. A fixed 2 GiB kept no trial above 512 MB, so KernelBench's large tasks (L1/6's
    1 GB inputs, the convolutions) computed every trial again for every candidate (H100, session 26), on a host
    with 128 GB."""
    raw = os.environ.get(BYTES_VAR, "").strip()
    if raw:
        return int(raw)
    from pytest_cudal1.workers.memory import free_bytes

    return max(DEFAULT_BYTES, free_bytes("cpu") // HOST_SHARE)


class TrialCache(Generic[V]):
    """Least-recently-used values by key, their total bytes at most ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._entries: collections.OrderedDict[Hashable, tuple[V, int]] = collections.OrderedDict()

    def get(self, key: Hashable) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def fits(self, nbytes: int) -> bool:
        """Whether a value of ``nbytes`` would be kept: at most a quarter of the bound."""
        return 0 < self.limit and nbytes * 4 <= self.limit

    def put(self, key: Hashable, value: V, nbytes: int) -> None:
        """Keep ``value`` (unless it does not ``fit``), evicting the least recently used beyond the bound."""
        if not self.fits(nbytes):
            return
        if key in self._entries:
            self.held -= self._entries.pop(key)[1]
        self._entries[key] = (value, nbytes)
        self.held += nbytes
        while self.held > self.limit:
            self.held -= self._entries.popitem(last=False)[1][1]

    def __len__(self) -> int:
        return len(self._entries)
