"""The channel between the controller and its workers: data only, never pickles.

A frame is a little-endian u32 header length, a UTF-8 JSON header, then the raw
bytes of each tensor (u64 length + bytes), or for a large one on a channel with a
bulk folder the length with its top bit set and the name of a file holding the
bytes (u16 name length + name; ``bulk``). Values are JSON scalars, lists, and
three tagged nodes: ``{"tensor": ...}``, ``{"tuple": [...]}``, ``{"dict": {...}}``.
Decoding builds nothing but those, so a candidate worker can make the
controller read wrong numbers at worst, never run code. Anything else a worker
puts in an output arrives as ``{"unsupported": "<type name>"}`` and fails the
structure check.

torch is imported lazily: the plugin module imports this file at start-up.
"""

from __future__ import annotations

import json
import mmap
import os
import select
import struct
import time
from typing import Any

from pytest_cudal1 import bulk
from pytest_cudal1.bulk import BulkError, BulkFile

MAX_HEADER = 64 * 1024 * 1024
MAX_BUFFER = bulk.MAX_BUFFER
BULK_FLAG = 1 << 63  # a buffer's length with this bit set: its bytes are in the named file
LAZY_BUFFER = 1 << 20  # buffers from this size on are received into an anonymous mapping (``_read_exact``)
# What a frame's tensor bytes may be: recv's buffers, and views of the host copies encode makes.
Buffer = bytes | bytearray | memoryview | mmap.mmap | BulkFile


class ChannelClosed(Exception):
    """The other end closed its pipe (its process exited or crashed)."""


class ChannelTimeout(Exception):
    """No complete frame arrived before the deadline."""


class ProtocolError(Exception):
    """The other end sent bytes that are not a well-formed frame."""


class BadFile(ProtocolError):
    """A frame, read whole, names a bulk file that is missing, of another size or changed after it was sent:
    the channel is still in step, so a worker can answer it with an error instead of dying."""


class Raw:
    """An encoded value the controller relays from one worker to another without decoding it.

    ``recv(raw=True)`` checks the frame as strictly as a decode would (so a bad
    frame is blamed on the worker that sent it), then keeps the JSON tree and
    the tensor bytes as they came: no copies into tensors on the controller.
    """

    def __init__(self, tree: Any, buffers: list[Buffer]) -> None:
        self.tree = tree
        self.buffers = buffers


class Unsupported:
    """Marks an output value of a type the wire does not carry (e.g. a tensor subclass)."""

    def __init__(self, type_name: str, why: str = "") -> None:
        self.type_name = type_name
        self.why = why

    def __repr__(self) -> str:
        return f"<unsupported {self.type_name}{': ' + self.why if self.why else ''}>"


# ---------------------------------------------------------------- encoding ---

def encode(value: Any, buffers: list[Buffer]) -> Any:
    """Turn a value into a JSON tree, appending tensor bytes to ``buffers``."""
    import torch

    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, Raw):
        tree = _shift(value.tree, len(buffers))
        buffers.extend(value.buffers)
        return tree
    if isinstance(value, torch.Tensor):
        if type(value) is not torch.Tensor and not isinstance(value, torch.nn.Parameter):
            return {"unsupported": type(value).__qualname__, "why": "tensor subclass"}
        return _encode_tensor(value, buffers)
    if type(value) is list:
        return [encode(v, buffers) for v in value]
    if type(value) is tuple:
        return {"tuple": [encode(v, buffers) for v in value]}
    if type(value) is dict and all(type(k) is str for k in value):
        return {"dict": {k: encode(v, buffers) for k, v in value.items()}}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    return {"unsupported": type(value).__qualname__}


def _encode_tensor(t: Any, buffers: list[Buffer]) -> dict[str, Any]:
    import torch

    meta = {
        "dtype": str(t.dtype).removeprefix("torch."),
        "shape": list(t.shape),
        "device": str(t.device),
        "buf": len(buffers),
    }
    host = t.detach().to("cpu").contiguous()
    if host.numel() == 0:
        buffers.append(b"")
    else:  # a view of the host copy, written straight to the pipe (a 6.4 GB output is copied no more)
        buffers.append(memoryview(host.reshape(-1).view(torch.uint8).numpy()))
    return {"tensor": meta}


def _shift(tree: Any, offset: int) -> Any:
    """A (checked) tree with its buffer indices moved by ``offset``: how a relayed value is embedded."""
    if isinstance(tree, list):
        return [_shift(v, offset) for v in tree]
    if isinstance(tree, dict) and "tensor" in tree:
        return {"tensor": {**tree["tensor"], "buf": int(tree["tensor"]["buf"]) + offset}}
    if isinstance(tree, dict) and "tuple" in tree:
        return {"tuple": [_shift(v, offset) for v in tree["tuple"]]}
    if isinstance(tree, dict) and "dict" in tree:
        return {"dict": {k: _shift(v, offset) for k, v in tree["dict"].items()}}
    return tree


def decode(tree: Any, buffers: list[Buffer], check_only: bool = False) -> Any:
    """Inverse of ``encode``; tensors come back on the CPU, device kept in ``.wire_device``.

    ``check_only`` runs every check and builds nothing (for relayed frames).
    """
    if tree is None or isinstance(tree, (bool, int, float, str)):
        return tree
    if isinstance(tree, list):
        return [decode(v, buffers, check_only) for v in tree]
    if not isinstance(tree, dict) or len(tree) not in (1, 2):
        raise ProtocolError(f"unexpected node {str(tree)[:80]!r}")
    if "tensor" in tree:
        return _decode_tensor(tree["tensor"], buffers, check_only)
    if "tuple" in tree:
        return tuple(decode(v, buffers, check_only) for v in tree["tuple"])
    if "dict" in tree:
        return {str(k): decode(v, buffers, check_only) for k, v in tree["dict"].items()}
    if "dtype" in tree:
        return _dtype(tree["dtype"])
    if "unsupported" in tree:
        return Unsupported(str(tree["unsupported"]), str(tree.get("why", "")))
    raise ProtocolError(f"unexpected node {str(tree)[:80]!r}")


def _dtype(name: Any) -> Any:
    import torch

    dtype = getattr(torch, str(name), None)
    if not isinstance(dtype, torch.dtype):
        raise ProtocolError(f"unknown dtype {name!r}")
    return dtype


def _decode_tensor(meta: dict[str, Any], buffers: list[Buffer], check_only: bool = False) -> Any:
    import torch

    dtype = _dtype(meta["dtype"])
    shape = [int(s) for s in meta["shape"]]
    if any(s < 0 for s in shape):
        raise ProtocolError(f"negative dimension in shape {shape}")
    index = int(meta["buf"])
    if not 0 <= index < len(buffers):
        raise ProtocolError(f"tensor names buffer {index} of {len(buffers)}")
    raw = buffers[index]
    if isinstance(raw, BulkFile) and not check_only:
        raw = raw.read()
    count = 1
    for s in shape:
        count *= s
    itemsize = torch.empty((), dtype=dtype).element_size()
    if len(raw) != count * itemsize:
        raise ProtocolError(f"tensor of shape {shape} {dtype} carried {len(raw)} bytes")
    if check_only:
        return None
    if count == 0:
        t = torch.empty(shape, dtype=dtype)
    else:
        writable = raw if isinstance(raw, (bytearray, mmap.mmap)) else bytearray(raw)  # recv's already are
        t = torch.frombuffer(writable, dtype=torch.uint8).view(dtype).reshape(shape)
    t.wire_device = str(meta.get("device", "cpu"))  # type: ignore[attr-defined]
    return t


# ----------------------------------------------------------------- framing ---

class Channel:
    """One direction-pair of pipes; ``send``/``recv`` whole frames. With ``bulk_folder`` (the controller's
    ``bulk.controller_folder()``, shared with its workers) large buffers travel as files there; ``map_files``
    maps received files instead of copying them (``bulk.read``: for a receiver whose senders are trusted)."""

    def __init__(self, read_fd: int, write_fd: int, bulk_folder: str | None = None, map_files: bool = False) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.bulk_folder = bulk_folder
        self.map_files = map_files

    def send(self, kind: str, body: Any = None) -> None:
        buffers: list[Buffer] = []
        header = json.dumps({"kind": kind, "body": encode(body, buffers), "nbuf": len(buffers)}).encode()
        parts: list[Buffer] = [struct.pack("<I", len(header)), header]
        for b in buffers:
            try:
                name = self._as_file(b)
            except BulkError as exc:  # a relayed file its sender took back: nothing is written, the channel in step
                raise BadFile(str(exc)) from None
            if name is None:
                parts += [struct.pack("<Q", len(b)), b]
            else:
                parts += [struct.pack("<QH", len(b) | BULK_FLAG, len(name)), name.encode()]
        for part in parts:
            view = memoryview(part)
            while view:
                n = os.write(self.write_fd, view)
                view = view[n:]

    def _as_file(self, b: Buffer) -> str | None:
        """The name of a file the receiver will find ``b`` in, or None to send it inline."""
        if isinstance(b, BulkFile):  # relayed by this controller, whose channels share its one folder
            return b.link()
        if self.bulk_folder is None or len(b) < bulk.BULK_BYTES:
            return None
        return bulk.write(self.bulk_folder, memoryview(b))

    def wait(self, timeout: float, tick: float) -> None:
        """Wait until a frame starts to arrive, waking every ``tick`` seconds meanwhile; raise ChannelTimeout after
        ``timeout``. A process that sleeps through a long wait wakes late when the frame comes (a core left idle
        that long sleeps deeply, a virtual one may be descheduled), and that delay lands on the clock around it."""
        deadline = time.monotonic() + timeout
        while not select.select([self.read_fd], [], [], min(tick, max(0.0, deadline - time.monotonic())))[0]:
            if time.monotonic() >= deadline:
                raise ChannelTimeout()

    def recv(self, timeout: float | None = None, raw: bool = False) -> tuple[str, Any]:
        """Read one frame; raise ChannelTimeout, ChannelClosed or ProtocolError.

        With ``raw``, the body comes back checked but undecoded, as a ``Raw`` to relay.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        (hlen,) = struct.unpack("<I", self._read_exact(4, deadline))
        if hlen > MAX_HEADER:
            raise ProtocolError(f"header of {hlen} bytes")
        try:
            header = json.loads(self._read_exact(hlen, deadline))
            kind, body, nbuf = str(header["kind"]), header["body"], int(header["nbuf"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ProtocolError(f"bad header: {exc}") from None
        buffers: list[Any] = []
        for _ in range(nbuf):
            (blen,) = struct.unpack("<Q", self._read_exact(8, deadline))
            if blen & BULK_FLAG:
                if self.bulk_folder is None:
                    raise ProtocolError("a bulk file named on a channel without a bulk folder")
                (nlen,) = struct.unpack("<H", self._read_exact(2, deadline))
                buffers.append((self._read_exact(nlen, deadline).decode("ascii", "replace"), blen & ~BULK_FLAG))
            elif blen > MAX_BUFFER:
                raise ProtocolError(f"buffer of {blen} bytes")
            else:
                buffers.append(self._read_exact(blen, deadline))
        buffers = self._files(buffers, raw)
        try:
            if raw:
                decode(body, buffers, check_only=True)
                return kind, Raw(body, buffers)
            return kind, decode(body, buffers)
        except ProtocolError:
            raise
        except (KeyError, IndexError, TypeError, ValueError, AttributeError, RuntimeError) as exc:
            raise ProtocolError(f"malformed body: {type(exc).__name__}: {exc}") from None

    def _files(self, buffers: list[Any], raw: bool) -> list[Buffer]:
        """The frame's (name, length) entries as the bytes they name, or, relayed, as ``BulkFile``s unread.
        Runs after the whole frame is read: a bad file leaves the channel in step (``BadFile``)."""
        named = [b for b in buffers if isinstance(b, tuple)]
        if not named:
            return buffers
        try:
            return [b if not isinstance(b, tuple) else BulkFile(self.bulk_folder, *b) if raw
                    else bulk.read(self.bulk_folder, *b, mapped=self.map_files) for b in buffers]
        except BulkError as exc:
            for name, length in named:  # the others named in the frame go too: nothing is left behind
                bulk.discard(self.bulk_folder, name)
            raise BadFile(str(exc)) from None

    def _read_exact(self, n: int, deadline: float | None) -> bytearray | mmap.mmap:
        """``n`` bytes read straight into one buffer: no chunk list joined and copied again (the pipe
        moved 0.35 GB/s that way, and a 6.4 GB tensor crosses several pipes per trial). A large buffer is an
        anonymous mapping, backed only as bytes arrive: a length alone makes the controller hold nothing."""
        try:
            buf = bytearray(n) if n < LAZY_BUFFER else mmap.mmap(-1, n)
        except (OSError, MemoryError, OverflowError):
            raise ProtocolError(f"buffer of {n} bytes: no room to receive it") from None
        view, got = memoryview(buf), 0
        while got < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.read_fd], [], [], left)[0]:
                    raise ChannelTimeout()
            read = os.readv(self.read_fd, [view[got:]])
            if not read:
                raise ChannelClosed()
            got += read
        return buf

    def close(self) -> None:
        """Close both ends once; a second call must not close a reused fd number."""
        for fd in (self.read_fd, self.write_fd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.read_fd = self.write_fd = -1
