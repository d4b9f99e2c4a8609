"""The memory input slots live in: one block per batch of slots, each slot a storage of its own, and a block the
reference worker makes for the candidate's timed inputs can be mapped by the candidate's worker.

So the trusted reference worker writes the candidate's timed inputs (``TimingInputs.mirror``): the candidate's
request to time a sample holds its calls and little else, and nothing of the candidate's runs between a refill
and its clocked window. Trial inputs and timed inputs are the same kind of memory on both sides: a storage of
exactly the slot's bytes that cannot be resized, at the same alignment (on the CPU a ``memfd`` mapping, never
the allocator's, whose large blocks may get transparent huge pages that the shared ones would not).
"""

from __future__ import annotations

import mmap
import os
from typing import Any

import torch

_MemPool = getattr(torch.cuda, "MemPool", None)  # torch >= 2.7
_use_mem_pool = getattr(torch.cuda, "use_mem_pool", None)

# Slots start at multiples of this: the CUDA caching allocator's alignment, and a page on the CPU.
CUDA_ALIGN = 512
CPU_ALIGN = 4096


class _Span:
    """A CUDA slot's bytes as an object torch can wrap without copying (``__cuda_array_interface__``): the tensor
    gets a storage of exactly these bytes, and keeps this object, and through it ``owner`` (the block and its
    memory pool; never the arena, whose buffers would then hold it in a cycle no collector sees), alive."""

    def __init__(self, owner: Any, block: torch.Tensor, offset: int, nbytes: int) -> None:
        self.owner = owner
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "version": 2,
                                         "data": (block.data_ptr() + offset, False)}


class Arena:
    """uint8 buffers of ``sizes`` bytes in one block, every byte ``fill`` if given.

    A ``shared`` block can be mapped by another process (``handle``, ``open_shared``): on CUDA a private
    memory pool holds it, so the segments the other process maps hold nothing else of this one's; on the
    CPU its ``memfd`` stays open until the arena goes."""

    def __init__(self, sizes: list[int], device: str, shared: bool = False, fill: int | None = None) -> None:
        self.device = device
        self.fd: int | None = None
        self.counters: list[tuple[bytes, int]] = []  # CUDA IPC reference counters handed out (``release``)
        self.pool = None
        align = CUDA_ALIGN if device.startswith("cuda") else CPU_ALIGN
        self.spans: list[tuple[int, int]] = []
        total = 0
        for n in sizes:
            self.spans.append((total, n))
            total += -(-n // align) * align
        self.total = max(total, align)
        if device.startswith("cuda"):
            if shared and _MemPool is not None and _use_mem_pool is not None:
                self.pool = _MemPool()
                with _use_mem_pool(self.pool):
                    self.block = torch.empty(self.total, dtype=torch.uint8, device=device)
            else:
                self.block = torch.empty(self.total, dtype=torch.uint8, device=device)
        else:
            fd = os.memfd_create("cudal1-inputs", os.MFD_CLOEXEC)
            os.ftruncate(fd, self.total)
            self.block = mmap.mmap(fd, self.total)
            if shared:
                self.fd = fd
            else:
                os.close(fd)
        self.buffers = _carve((self.block, self.pool), self.block, self.spans, device)
        if fill is not None:  # the whole block at once (the guard bytes of thousands of slots)
            _whole(self.block, self.total, device).fill_(fill)

    def handle(self) -> dict[str, Any]:
        """What ``open_shared`` needs in the other process (JSON): the block's CUDA IPC handle, or this process's
        ``memfd`` by path, and the slots' spans in it."""
        if self.device.startswith("cuda"):
            dev, handle, size, offset, counter, counter_offset, event, sync = \
                self.block.untyped_storage()._share_cuda_()
            self.counters.append((counter, counter_offset))
            return {"cuda": [dev, handle.hex(), size, offset, counter.hex(), counter_offset,
                             event.hex() if event else None, bool(sync)], "spans": self.spans}
        assert self.fd is not None, "an arena not made shared has no handle"
        return {"memfd": f"/proc/{os.getpid()}/fd/{self.fd}", "total": self.total, "spans": self.spans}

    def release(self) -> None:
        """Let the block go once the process it was shared with has exited. torch frees a shared CUDA block only
        when the other process has counted its mapping down, which a killed process never does: this worker
        counts it down instead, so its memory comes back on the next ``torch.cuda.ipc_collect``."""
        for counter, offset in self.counters:
            torch.UntypedStorage._release_ipc_counter_cuda(counter, offset)
        self.counters = []

    def __del__(self, _close: Any = os.close) -> None:  # bound now: at exit, ``os`` may be gone first
        if self.fd is not None:
            _close(self.fd)
            self.fd = None


def open_shared(handle: dict[str, Any], device: str) -> list[torch.Tensor]:
    """The buffers of another process's shared ``Arena``, mapped into this one."""
    spans = [(int(o), int(n)) for o, n in handle["spans"]]
    if "cuda" in handle:
        dev, h, size, offset, counter, counter_offset, event, sync = handle["cuda"]
        torch.cuda._lazy_init()
        storage = torch.UntypedStorage._new_shared_cuda(
            int(dev), bytes.fromhex(h), int(size), int(offset), bytes.fromhex(counter), int(counter_offset),
            bytes.fromhex(event) if event else None, bool(sync))
        block = torch.empty(0, dtype=torch.uint8, device=device).set_(storage, 0, (int(size),))
        return _carve(block, block, spans, device)
    with open(handle["memfd"], "r+b") as f:
        block = mmap.mmap(f.fileno(), int(handle["total"]))
    return _carve(block, block, spans, device)


def _whole(block: Any, total: int, device: str) -> torch.Tensor:
    return block if device.startswith("cuda") else torch.frombuffer(block, dtype=torch.uint8, count=total)


def _carve(owner: Any, block: Any, spans: list[tuple[int, int]], device: str) -> list[torch.Tensor]:
    """A tensor of its own storage per span of ``block``; each keeps ``owner`` alive (CPU: the mapping)."""
    if device.startswith("cuda"):
        return [torch.as_tensor(_Span(owner, block, o, n), device=device) for o, n in spans]
    return [torch.frombuffer(block, dtype=torch.uint8, count=n, offset=o) for o, n in spans]
