"""Checks around each call into candidate code, run inside the candidate worker.

They report what they see as flags (``{"code", "detail"}``); the controller
decides, after comparing with what the reference worker saw under the same
checks (a reference that itself aliases or mutates its input makes that legal).
Everything here is bound at import, before the candidate module is loaded, and
``tamper.TamperWatch`` notices if the candidate rebinds any of it afterwards.
"""

from __future__ import annotations

import contextlib
import os
import sys
import sysconfig
import threading
import time
from typing import Any, Iterable, Iterator

import torch

POISON_WORD = 0x7FA5A5A5  # a float32 signalling NaN with a payload no arithmetic produces
QUIET_BIT = 0x00400000
M_PERTURB = -6
MALLOC_PERTURB_BYTE = 0x5A  # glibc fills fresh allocations with its complement, 0xA5
MALLOC_FRESH_WORD = -0x5A5A5A5B  # 0xA5A5A5A5 as a signed int32
POISON_COPIES = 4
POISON_SPARE_BYTES = 1 << 30  # the most the copies beyond the first of one size may hold
GUARD_BYTES = 4096
GUARD_BYTE = 0xA5


# ------------------------------------------------------------ tensors ---

def tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from tensors(v)


def lazy_outputs(out: Any) -> str | None:
    """Why an output is not a plain, materialized tensor, or None."""
    for t in tensors(out):
        if type(t) is not torch.Tensor:
            return f"output is a {type(t).__qualname__} (tensor subclass)"
        if t.device.type == "meta" or (t.numel() > 0 and t.untyped_storage().nbytes() == 0):
            return "output has no real storage"
    return None


def _span(t: torch.Tensor) -> tuple[int, int]:
    start = t.untyped_storage().data_ptr()
    return start, start + t.untyped_storage().nbytes()


def aliases(out: Any, inputs: list[Any]) -> bool:
    """Does any output tensor share memory with any input tensor?"""
    spans = [_span(x) for x in tensors(inputs) if x.numel()]
    for t in tensors(out):
        if t.numel():
            a, b = _span(t)
            if any(a < d and c < b for c, d in spans):
                return True
    return False


# Bytes per block of the checks that scan a whole output in the candidate's worker (``same_values``,
# ``poisoned_words``): their temporaries are the harness's, charged to the candidate's memory. Whole-size, an
# int64 count of a 6.4 GB output's mask asked for 12.8 GB and an honest candidate got OUT_OF_MEMORY (H100).
SCAN_BYTES = 1 << 26


def same_values(a: Any, b: Any) -> bool:
    """Bitwise equality of two outputs (NaN payloads included)."""
    ta, tb = list(tensors(a)), list(tensors(b))
    if len(ta) != len(tb):
        return False
    for x, y in zip(ta, tb):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        bx, by = _bytes(x), _bytes(y)
        if not all(torch.equal(bx[i:i + SCAN_BYTES], by[i:i + SCAN_BYTES]) for i in range(0, bx.numel(), SCAN_BYTES)):
            return False
    return True


def _bytes(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def storage_ptrs(out: Any) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in tensors(out) if t.numel()}


def snapshot(out: Any) -> list[torch.Tensor]:
    """A digest of the outputs' exact bits, queued on the caller's stream right after return (no device sync).

    A caller that reads the output on its own stream sees exactly what it digests; work still running on
    another stream or thread shows as another digest later (``settled``). A digest, not a copy: a copy of a
    6.4 GB output was the allocation that left an honest wrapper OUT_OF_MEMORY on an 80 GB H100 (session 26).
    """
    return [bit_digest(t) for t in tensors(out)]


DIGEST_SEED = 0xD16E57  # the fixed random weights of this digest and of the value digests (``digests``)
DIGEST_WORDS = 1 << 20  # the after-return digest's block: 4 MiB of 32-bit words, each with weights of its own
_bit_weights: dict[tuple[str, int], torch.Tensor] = {}  # per device: 2 x DIGEST_WORDS int64, 16 MB


def bit_weights(device: torch.device) -> torch.Tensor:
    """The fixed random odd 64-bit weights of the bit digests (2 x ``DIGEST_WORDS``), drawn on ``device`` once."""
    key = (str(device), DIGEST_WORDS)
    if key not in _bit_weights:
        gen = torch.Generator(device=device).manual_seed(DIGEST_SEED)
        _bit_weights[key] = torch.randint(-(2**62), 2**62, (2, DIGEST_WORDS), generator=gen, dtype=torch.int64,
                                          device=device) | 1
    return _bit_weights[key]


def bit_digest(t: torch.Tensor) -> torch.Tensor:
    """Two sums over the tensor's 32-bit words, each times fixed random odd 64-bit weights (wrapping), block by
    block (``DIGEST_WORDS``) into a polynomial hash, so blocks that trade places differ too: any change of bits
    changes it but by chance. The tail bytes are a word of their own. Only kernels on the current stream, the
    weights drawn on the device: nothing here waits for the GPU."""
    raw = _bytes(t)
    w = bit_weights(raw.device)
    whole = raw.numel() // 4 * 4
    words = raw[:whole].view(torch.int32)
    tail = torch.nn.functional.pad(raw[whole:], (0, (4 - raw.numel() % 4) % 4)).view(torch.int32)
    acc = torch.zeros(2, dtype=torch.int64, device=raw.device)
    for block in [*(words[i:i + DIGEST_WORDS] for i in range(0, words.numel(), DIGEST_WORDS)), tail]:
        acc = acc * 1_000_003 + (block.to(torch.int64) * w[:, :block.numel()]).sum(1)
    return acc


# ---------------------------------------------------------- memory ---

def poison(nbytes: list[int], device: str) -> None:
    """Fill blocks of the sizes the outputs will need, then free them for the allocator to hand out.

    Several blocks per size, so a stray allocation cannot take them all; one only for an output over
    ``POISON_SPARE_BYTES``: four copies of a 6.4 GB output cached in the candidate's process left the
    reference too little memory for its trial (H200)."""
    blocks = []
    for n in nbytes:
        words = max(1, (n + 3) // 4)
        copies = POISON_COPIES if n * (POISON_COPIES - 1) <= POISON_SPARE_BYTES else 1
        for _ in range(copies):
            blocks.append(torch.full((words,), POISON_WORD, dtype=torch.int32, device=device))
    del blocks


def poisoned_words(out: Any) -> int:
    """Output words still holding a poison pattern (the quiet bit of the NaN masked: arithmetic sets it)."""
    count = 0
    for t in tensors(out):
        raw = _bytes(t)
        words = raw[: raw.numel() // 4 * 4].view(torch.int32)
        found = torch.zeros((), dtype=torch.int64, device=words.device)  # read back once per tensor
        for i in range(0, words.numel(), SCAN_BYTES // 4):
            block = words[i:i + SCAN_BYTES // 4]
            found += torch.count_nonzero((block & ~QUIET_BIT) == POISON_WORD)
            found += torch.count_nonzero(block == MALLOC_FRESH_WORD)
        count += int(found)
    return count


def _glibc() -> Any:
    """The C library's handle if it is glibc's (it has ``mallopt``), else False."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.mallopt  # noqa: B018 - absent outside glibc
    except (OSError, AttributeError):
        return False
    return libc


# Bound when the harness is imported, before any candidate code, and watched (``TamperWatch``) like the
# harness's functions: a handle set at first use could be planted by a candidate before it.
_libc = _glibc()


def perturb_malloc(on: bool) -> None:
    """glibc's M_PERTURB: fresh host allocations read as 0xA5 bytes while on (CPU calls only, ``filled_malloc``).

    The CPU allocator gives no guarantee that a freed, poisoned block comes back, so on the CPU every
    fresh ``malloc`` is filled instead.
    """
    if _libc:
        _libc.mallopt(M_PERTURB, MALLOC_PERTURB_BYTE if on else 0)


@contextlib.contextmanager
def filled_malloc(on: bool) -> Iterator[None]:
    """``perturb_malloc`` around a call: trials and timed calls alike, so what a fresh block holds
    does not tell them apart."""
    if not on:  # nothing to switch (and no mallopt inside a GPU's timed region)
        yield
        return
    perturb_malloc(True)
    try:
        yield
    finally:
        perturb_malloc(False)


class Slot:
    """One input tensor's home: its bytes between guard bytes (0xA5) in a harness buffer.

    Trials and timed calls hand ``forward`` the same kind of tensor, a fresh ``view()`` into a
    slot: the same storage offset, storage size, alignment, strides and view-ness, and version 0,
    since the slot is written through an alias with a version counter of its own (``target``). So
    no input property tells a checked call from a timed one, and guard bytes surround both.
    """

    def __init__(self, like: torch.Tensor) -> None:
        self.dtype, self.shape = like.dtype, like.shape
        self.nbytes = like.numel() * like.element_size()
        self.buffer = torch.full((GUARD_BYTES * 2 + self.nbytes,), GUARD_BYTE, dtype=torch.uint8, device=like.device)
        writer = torch.empty(0, dtype=torch.uint8, device=like.device)
        writer.set_(self.buffer.untyped_storage(), 0, self.buffer.shape)
        self.target = self._inner(writer)  # what the harness writes through
        self.intact = torch.full((GUARD_BYTES,), GUARD_BYTE, dtype=torch.uint8, device=like.device)

    def _inner(self, buffer: torch.Tensor) -> torch.Tensor:
        return buffer[GUARD_BYTES:GUARD_BYTES + self.nbytes].view(self.dtype).view(self.shape)

    def view(self) -> torch.Tensor:
        """A fresh tensor object over the slot's bytes: what ``forward`` gets."""
        return self._inner(self.buffer)

    def overrun(self) -> bool:
        """Were guard bytes overwritten? (``torch.equal``: a timed sample checks hundreds of slots.)"""
        return not (torch.equal(self.buffer[:GUARD_BYTES], self.intact)
                    and torch.equal(self.buffer[-GUARD_BYTES:], self.intact))


def overrun(slots: list[Slot]) -> str | None:
    """Which input's guard bytes were overwritten, if any: all slots of a device compared at once (a timed sample's
    hundreds of slots, one wait for the GPU each, took ~10 ms a sample on an H100), then one by one where any was."""
    edges: dict[torch.device, list[torch.Tensor]] = {}
    for slot in slots:
        edges.setdefault(slot.buffer.device, []).extend((slot.buffer[:GUARD_BYTES], slot.buffer[-GUARD_BYTES:]))
    if all(bool(torch.stack(both).eq(GUARD_BYTE).all()) for both in edges.values()):
        return None
    for i, slot in enumerate(slots):
        if slot.overrun():
            return f"guard bytes around input tensor #{i} were overwritten"
    return None


def reused(outs: list[Any], held: Iterable[Any], exempt: set[int] | None = None) -> str | None:
    """Why ``outs`` are not their call's own, if they are not: one shares storage with another or with a ``held``
    earlier output, or an earlier output can no longer be read. Torch's CUDA-graph trees make an output's storage
    raise once a later replay overwrote it (``torch.compile(mode="reduce-overhead")`` returned without a clone:
    L2/91 of CUDA-L1's release, which crashed this check instead of being named).
    ``exempt``: storages that may repeat (input sets', when the reference returns views of its inputs)."""
    exempt = exempt or set()
    seen: set[int] = set()
    for o in held:
        try:
            seen |= storage_ptrs(o)
        except RuntimeError as exc:
            first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            return f"an earlier call's output was overwritten by a later call (reading it raised: {first})"
    seen -= exempt
    for o in outs:
        ptrs = storage_ptrs(o) - exempt
        if ptrs & seen:
            return "the output buffer of an earlier call was returned again"
        seen |= ptrs
    return None


class Guarded:
    """A trial's inputs, each in a ``Slot``, with copies to tell whether the call changed them."""

    def __init__(self, inputs: list[Any]) -> None:
        self.slots: list[Slot] = []
        self.inputs: list[Any] = []
        for x in inputs:
            if isinstance(x, torch.Tensor) and x.numel():
                slot = Slot(x)
                slot.target.copy_(x)
                self.slots.append(slot)
                self.inputs.append(slot.view())
            else:
                self.inputs.append(x)
        self.originals = [x.clone() if isinstance(x, torch.Tensor) else x for x in self.inputs]

    def overrun(self) -> str | None:
        return overrun(self.slots)

    def mutated(self) -> str | None:
        for i, (now, before) in enumerate(zip(self.inputs, self.originals)):
            if isinstance(now, torch.Tensor) and not same_values(now, before):
                return f"input #{i} changed during forward"
        return None


# ------------------------------------------------ threads & processes ---

def python_threads() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.ident is not None}


def child_pids() -> set[int]:
    pids: set[int] = set()
    task_dir = f"/proc/{os.getpid()}/task"
    try:
        for tid in os.listdir(task_dir):
            with open(f"{task_dir}/{tid}/children") as f:
                pids.update(int(p) for p in f.read().split())
    except OSError:
        pass
    return pids


STDLIB = sysconfig.get_paths()["stdlib"] + os.sep
PACKAGES = tuple({sysconfig.get_paths()[k] + os.sep for k in ("purelib", "platlib")})  # inside STDLIB, often
GRACE_S = 0.1
IDLE_WINDOW_S = 0.01  # how long a thread that waits in the standard library is watched for CPU use
IDLE_CPU_NS = 1_000_000  # more CPU than this in the window is work, wherever its Python frame is


def _in_stdlib(ident: int) -> bool:
    """Is the thread's innermost Python frame in the standard library (a pool's or queue's wait, or a
    C call made from there)?"""
    frame = sys._current_frames().get(ident)
    path = frame.f_code.co_filename if frame is not None else STDLIB
    return path.startswith(STDLIB) and not path.startswith(PACKAGES)


def _cpu_ns(native_id: int | None) -> int | None:
    """CPU time the thread has run, in ns (Linux schedstat), or None."""
    try:
        with open(f"/proc/self/task/{native_id}/schedstat") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def busy_threads(threads_before: set[int]) -> int:
    """Threads started during the call that are doing work: running Python code of their own, or using
    the CPU while their frame sits in the standard library (``pool.submit(torch.mul, ...)`` runs C code
    from ``concurrent.futures``). Threads of any pool (``concurrent.futures``, ``multiprocessing.pool``,
    ``queue``) that wait for work use no CPU and are idle."""
    new = [t for t in threading.enumerate() if t.ident is not None and t.ident not in threads_before]
    waiting = [t for t in new if _in_stdlib(t.ident)]  # type: ignore[arg-type]
    busy = len(new) - len(waiting)
    if waiting:
        before = [_cpu_ns(t.native_id) for t in waiting]
        time.sleep(IDLE_WINDOW_S)  # lets them run: a waiting thread still waits, a working one works
        after = [_cpu_ns(t.native_id) for t in waiting]
        busy += sum(1 for t, a, b in zip(waiting, before, after)
                    if t.is_alive() and a is not None and b is not None and b - a > IDLE_CPU_NS)
    return busy


def leftovers(threads_before: set[int], children_before: set[int]) -> str | None:
    """Busy threads or child processes started during the call and still alive after it returned.

    Pool threads started by the call that sit waiting for work are idle, not deferred work.
    """
    time.sleep(0)  # let a thread that is about to finish do so
    busy = busy_threads(threads_before)
    children = child_pids() - children_before
    if busy:
        return f"{busy} thread(s) started by forward still running after it returned"
    if children:
        return f"{len(children)} child process(es) started by forward still running after it returned"
    return None


def settled(snap: list[torch.Tensor], out: Any, threads_before: set[int]) -> bool:
    """Does the output still have its after-return digest (``snapshot``)? While threads the call started
    live, watch a while."""
    deadline = time.monotonic() + (GRACE_S if python_threads() - threads_before else 0.0)
    while True:
        now = snapshot(out)  # a tensor's changed size changes its digest; a changed count is checked here
        if len(now) != len(snap) or not all(map(torch.equal, snap, now)):
            return False
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.005)
