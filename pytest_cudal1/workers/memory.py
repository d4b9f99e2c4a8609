"""How much device memory the harness takes for itself: its timing buffers' placements, the outputs it holds,
the cached blocks it hands back, and what an OUT_OF_MEMORY message reports. The harness shrinks its own
buffers before it squeezes a candidate (issue 14, item 11)."""

from __future__ import annotations

import collections
import os
from typing import TYPE_CHECKING, Any

import torch

from pytest_cudal1.workers import guards

if TYPE_CHECKING:
    from pytest_cudal1.workers.timed_loop import TimedLoop

# Bound before any candidate code is imported, so a candidate that rebinds the
# module attributes does not change what the harness calls.
_cuda_synchronize = torch.cuda.synchronize
_memory_reserved = torch.cuda.memory_reserved
_memory_allocated = torch.cuda.memory_allocated
_empty_cache = torch.cuda.empty_cache
_mem_get_info = torch.cuda.mem_get_info

# Cached free device memory beyond this, outside the placements' pools, is handed back before an eager sample.
STRANDED_CACHE_BYTES = 1 << 30

# Buffer placements (``TimedLoop``; how many at most is the controller's ``TimingConfig.placements``) may
# take this share of the free memory.
PLACEMENT_MEMORY_SHARE = 0.25


def storage_bytes(outs: list[Any]) -> int:
    """Bytes of the distinct storages the plain tensors of ``outs`` view (a lazy one is named by the checks)."""
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
                for t in guards.tensors(outs) if type(t) is torch.Tensor}
    return sum(storages.values())


def hand_back_cached() -> None:
    """Return this process's cached, unused device blocks (the trials' tensors) before sizing the timing buffers:
    free memory counts none of them, and on the H200 the reference ran out of memory beside a 6.4 GB task's
    graph wrapper while its own allocator held 17.9 GB and the candidate's worker 72 GB beyond timing buffers."""
    _cuda_synchronize()
    _empty_cache()


def hand_back_stranded() -> None:
    """Cached blocks outside a placement's pool are of no use to the calls inside it, and torch's allocator frees
    no cached block to retry an allocation while a pool is in use (that counts as a capture underway): on the
    H200 the reference of a 6.4 GB task ran out of memory inside its placement beside five cached 6.4 GB blocks
    (its timed inputs' refill temporaries). Checked before every eager sample, outside the timed region."""
    if _memory_reserved() - _memory_allocated() > STRANDED_CACHE_BYTES:
        _empty_cache()


def let_go(held: collections.deque[Any], need: int, device: str, keep: int) -> None:
    """Held outputs let go, oldest first, down to ``keep``, while the device's room (``room_bytes``) would not
    hold ``need`` bytes (a call's output twice over: it and its temporaries). The held outputs of a 6.4 GB task
    (four of them hold 25.6 GB) are the harness's, not the candidate's: with all of them held, an 80 GB H100 had
    no room left beside an honest CUDA-graph wrapper, in its trials and then in its timed samples (sessions 26
    and 27). Only on CUDA: host memory is not what a held output competes for there."""
    if not device.startswith("cuda"):
        return
    while len(held) > keep and room_bytes(device) < need:
        held.popleft()


def room_bytes(device: str) -> int:
    """What a new allocation can have: ``free_bytes`` plus, on CUDA, the allocator's cached blocks not in use
    (read through the functions bound before candidate code ran, which a candidate cannot rebind)."""
    cached = _memory_reserved() - _memory_allocated() if device.startswith("cuda") else 0
    return free_bytes(device) + cached


def free_bytes(device: str) -> int:
    """Free device memory (CUDA) or available host memory (CPU), in bytes; 0 when unknown."""
    if device.startswith("cuda"):
        return int(_mem_get_info()[0])
    try:
        with open("/proc/meminfo", encoding="ascii") as f:  # MemAvailable counts reclaimable page cache
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def placements_fitting(per_placement: int, device: str, most: int, reserve: int = 0, copies: int = 1,
                       beside: int = 0) -> int:
    """How many buffer placements of ``per_placement`` bytes (up to ``most``) the free memory allows.

    At most ``PLACEMENT_MEMORY_SHARE`` of the free memory, and never so many that less than ``reserve``
    bytes stay free once ``copies`` workers have each placed as many (the reference places first, for
    itself and the candidate after it). ``reserve`` is the candidate's headroom: the harness shrinks its
    own buffers, down to one placement, before it squeezes the candidate (an honest CUDA-graph wrapper
    keeps a static copy of its inputs, and got OUT_OF_MEMORY beside eight placements on each side).
    ``beside``: what each worker holds outside its placements while timed (held outputs, ``TimedLoop.place``).
    """
    free = free_bytes(device)
    room = min(PLACEMENT_MEMORY_SHARE * free, (free - reserve) / max(copies, 1) - beside)
    return max(1, min(most, int(room / max(per_placement, 1))))


def memory_held(loop: TimedLoop | None, device: str) -> dict[str, int]:
    """What this worker holds: its device memory (CUDA: reserved by torch's allocator; CPU: resident
    set) and, of that, the timing buffers. For an OUT_OF_MEMORY verdict's message."""
    if device.startswith("cuda"):
        held = int(_memory_reserved())
    else:
        try:
            with open("/proc/self/statm", encoding="ascii") as f:
                held = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            held = 0
    return {"held_bytes": held, "timing_bytes": loop.harness_bytes() if loop is not None else 0}


