"""The controller<->worker wire: data only, never pickles.

Round trips go through real pipes (``Channel`` on ``os.pipe``), with a writer
thread so frames larger than the pipe buffer do not block. Malformed input must
surface as ``ProtocolError`` (which the controller turns into
PROTOCOL_VIOLATION), and decoding must build nothing but plain values, tensors,
tuples and dicts.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import struct
import threading
import time
from typing import Any

import pytest
import torch

from pytest_cudal1 import bulk
from pytest_cudal1.bulk import BulkFile
from pytest_cudal1.reasons import Reason
from pytest_cudal1.wire import (BULK_FLAG, BadFile, Channel, ChannelClosed, ChannelTimeout, ProtocolError, Raw,
                                Unsupported, decode, encode)
from pytest_cudal1.workers.process import WorkerFailure, WorkerProcess

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16,
          torch.int32, torch.int64, torch.bool, torch.complex64]


@pytest.fixture
def pipe():
    """(writer channel, reader channel) over two real pipes; closed afterwards."""
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    tx, rx = Channel(r2, w1), Channel(r1, w2)
    yield tx, rx
    tx.close()
    rx.close()


def send_in_thread(ch: Channel, kind: str, body: Any) -> threading.Thread:
    t = threading.Thread(target=ch.send, args=(kind, body), daemon=True)
    t.start()
    return t


def roundtrip(tx: Channel, rx: Channel, body: Any) -> Any:
    t = send_in_thread(tx, "ok", body)
    kind, got = rx.recv(timeout=30)
    t.join(30)
    assert kind == "ok"
    return got


def raw_frame(header: Any, buffers: list[bytes] = (), header_bytes: bytes | None = None) -> bytes:
    hb = header_bytes if header_bytes is not None else json.dumps(header).encode()
    out = struct.pack("<I", len(hb)) + hb
    for b in buffers:
        out += struct.pack("<Q", len(b)) + b
    return out


def recv_raw(data: bytes, timeout: float = 5, relay: bool = False) -> tuple[str, Any]:
    r, w = os.pipe()
    try:
        os.write(w, data)
        os.close(w)
        w = -1
        return Channel(r, -1).recv(timeout, raw=relay)
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def raw_bytes(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().reshape(-1).view(torch.uint8)


def sample(dtype: torch.dtype, shape: tuple[int, ...] = (3, 5)) -> torch.Tensor:
    g = torch.Generator().manual_seed(7)
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, generator=g)
    if dtype.is_floating_point:
        t = torch.randn(shape, dtype=torch.float64, generator=g).to(dtype)
        t.view(-1)[0] = float("nan")
        t.view(-1)[1] = float("-inf")
        return t
    if dtype is torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, shape, dtype=dtype, generator=g)


# ----------------------------------------------------------------- round trips ---

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_tensor_roundtrip_is_bit_exact(pipe, dtype: torch.dtype) -> None:
    t = sample(dtype)
    got = roundtrip(*pipe, t)
    assert type(got) is torch.Tensor
    assert got.dtype == dtype and got.shape == t.shape
    # bitwise: NaN payloads and -0.0 included
    assert torch.equal(raw_bytes(got), raw_bytes(t))
    assert got.wire_device == "cpu"


@pytest.mark.parametrize("shape", [(0,), (0, 3), (2, 0, 4), ()], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_empty_and_scalar_tensors(pipe, dtype: torch.dtype, shape: tuple[int, ...]) -> None:
    t = torch.ones(shape, dtype=dtype)
    got = roundtrip(*pipe, t)
    assert got.shape == t.shape and got.dtype == dtype
    assert torch.equal(got, t)


def test_nested_values_roundtrip(pipe) -> None:
    body = {
        "outputs": (torch.arange(6, dtype=torch.bfloat16).reshape(2, 3),
                    [torch.zeros(0, 2), {"inner": (1, 2.5, None, True, "s")}]),
        "list": [[], [1, [2, [3]]]],
        "empty_tuple": (),
        "empty_dict": {},
        "dtype": torch.float16,
        "big_int": 2**62,
        "float": -0.0,
    }
    got = roundtrip(*pipe, body)
    assert set(got) == set(body)
    a, (b, c) = got["outputs"]
    assert isinstance(got["outputs"], tuple) and isinstance(got["outputs"][1], list)
    assert a.dtype == torch.bfloat16 and torch.equal(a, body["outputs"][0])
    assert b.shape == (0, 2)
    assert c == {"inner": (1, 2.5, None, True, "s")}
    assert type(c["inner"]) is tuple
    assert got["list"] == [[], [1, [2, [3]]]]
    assert got["empty_tuple"] == () and got["empty_dict"] == {}
    assert got["dtype"] is torch.float16
    assert got["big_int"] == 2**62
    assert str(got["float"]) == "-0.0"


def test_noncontiguous_and_large_tensors(pipe) -> None:
    base = torch.randn(600, 800)  # 1.9 MB: larger than a pipe's buffer, received into a mapping
    t = base.t()[::2]  # non-contiguous view, 0.96 MB: received into a bytearray
    got = roundtrip(*pipe, [t, base])
    assert torch.equal(got[0], t) and torch.equal(got[1], base)
    assert got[0].is_contiguous()


def test_several_frames_in_order(pipe) -> None:
    tx, rx = pipe
    for i in range(3):
        tx.send("ok", {"i": i, "t": torch.full((2,), float(i))})
    for i in range(3):
        kind, body = rx.recv(5)
        assert kind == "ok" and body["i"] == i and body["t"].tolist() == [float(i)] * 2


# ------------------------------------------------------------- unsupported values ---

class Marked(torch.Tensor):
    pass


class Custom:
    def __init__(self) -> None:
        self.payload = torch.ones(2)


def test_tensor_subclass_arrives_as_unsupported(pipe) -> None:
    sub = torch.ones(2, 3).as_subclass(Marked)
    got = roundtrip(*pipe, {"out": sub, "plain": torch.ones(1), "param": torch.nn.Parameter(torch.ones(2))})
    assert isinstance(got["out"], Unsupported)
    assert got["out"].type_name == "Marked" and "subclass" in got["out"].why
    assert type(got["plain"]) is torch.Tensor
    assert type(got["param"]) is torch.Tensor  # a Parameter travels as its data


@pytest.mark.parametrize("value, type_name", [
    (Custom(), "Custom"),
    ({1: "int key"}, "dict"),
    ({"a", "b"}, "set"),
    (b"bytes", "bytes"),
    (torch.nn.ReLU(), "ReLU"),
    (lambda: 1, "function"),
], ids=["object", "int-keyed-dict", "set", "bytes", "module", "function"])
def test_other_objects_arrive_as_unsupported(pipe, value: Any, type_name: str) -> None:
    got = roundtrip(*pipe, [value])
    assert isinstance(got[0], Unsupported)
    assert got[0].type_name.endswith(type_name)


# ------------------------------------------------------------------ malformed ---

def test_closed_pipe_and_timeout(pipe) -> None:
    tx, rx = pipe
    with pytest.raises(ChannelTimeout):
        rx.recv(timeout=0.2)
    tx.close()
    with pytest.raises(ChannelClosed):
        rx.recv(timeout=5)


def test_waiting_awake_finds_a_late_frame_and_times_out_without_one(pipe) -> None:
    """``Channel.wait``, how the controller awaits a timed sample's answer: in short ticks, so it is awake when the
    frame comes. A frame sent after many ticks is found and then read whole; with none, ChannelTimeout at the
    deadline."""
    tx, rx = pipe
    t0 = time.monotonic()
    with pytest.raises(ChannelTimeout):
        rx.wait(0.2, 0.01)
    assert 0.2 <= time.monotonic() - t0 < 1.0
    late = threading.Timer(0.1, tx.send, ("ok", {"calls": 3}))
    late.start()
    rx.wait(5, 0.003)
    assert rx.recv(timeout=5) == ("ok", {"calls": 3})
    late.join()


def test_frame_cut_short_is_channel_closed() -> None:
    whole = raw_frame({"kind": "ok", "body": None, "nbuf": 0})
    with pytest.raises(ChannelClosed):
        recv_raw(whole[:-3])


def test_a_declared_length_alone_makes_the_receiver_hold_nothing() -> None:
    """A worker that announces an 8 GiB buffer and sends 4 bytes of it: the controller's memory stays put
    (the buffer is a mapping backed as bytes arrive), and the cut frame is ChannelClosed."""
    frame = raw_frame({"kind": "ok", "nbuf": 1, "body": None}) + struct.pack("<Q", 8 << 30) + b"\0" * 4
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    with pytest.raises(ChannelClosed):
        recv_raw(frame)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 * 1024


@pytest.mark.parametrize("data", [
    pytest.param(struct.pack("<I", 0xFFFFFFFF), id="header-too-long"),
    pytest.param(raw_frame(None, header_bytes=b"\xff\xfe not json"), id="header-not-json"),
    pytest.param(raw_frame(["kind", "body"]), id="header-not-object"),
    pytest.param(raw_frame({"body": 1, "nbuf": 0}), id="no-kind"),
    pytest.param(raw_frame({"kind": "ok", "body": 1, "nbuf": "many"}), id="nbuf-not-int"),
    pytest.param(raw_frame({"kind": "ok", "body": 1, "nbuf": 1}) + struct.pack("<Q", 2**63), id="buffer-too-long"),
    pytest.param(raw_frame({"kind": "ok", "body": {"evil": 1, "x": 2, "y": 3}, "nbuf": 0}), id="node-3-keys"),
    pytest.param(raw_frame({"kind": "ok", "body": {"__reduce__": "os.system"}, "nbuf": 0}), id="unknown-node"),
    pytest.param(raw_frame({"kind": "ok", "nbuf": 1,
                            "body": {"tensor": {"dtype": "Tensor", "shape": [1], "buf": 0}}}, [b"\0" * 4]),
                 id="dtype-not-a-dtype"),
    pytest.param(raw_frame({"kind": "ok", "nbuf": 1,
                            "body": {"tensor": {"dtype": "float32", "shape": [4], "buf": 0}}}, [b"\0" * 12]),
                 id="byte-count-mismatch"),
    pytest.param(raw_frame({"kind": "ok", "nbuf": 1,
                            "body": {"tensor": {"dtype": "float32", "shape": [-1], "buf": 0}}}, [b"\0" * 4]),
                 id="negative-dim"),
])
def test_malformed_frames_raise_protocol_error(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        recv_raw(data)


# Nodes a worker can send that a naive decoder would trip over with IndexError,
# KeyError or TypeError: each must be a ProtocolError (the controller maps only
# that to PROTOCOL_VIOLATION), whether the frame is decoded or only relayed.
UNCHECKED_NODES = [
    pytest.param({"tensor": {"dtype": "float32", "shape": [1], "buf": 3}}, id="buffer-index-out-of-range"),
    pytest.param({"tensor": {"dtype": "float32", "shape": [0], "buf": -1}}, id="buffer-index-negative"),
    pytest.param({"tensor": {"dtype": "float32", "buf": 0}}, id="tensor-without-shape"),
    pytest.param({"tensor": 5}, id="tensor-meta-not-object"),
    pytest.param({"tensor": {"dtype": "float32", "shape": [0, -1], "buf": 0}}, id="empty-with-negative-dim"),
    pytest.param({"dict": [1, 2]}, id="dict-node-not-object"),
    pytest.param({"tuple": 5}, id="tuple-node-not-list"),
]


@pytest.mark.parametrize("node", UNCHECKED_NODES)
@pytest.mark.parametrize("relay", [False, True], ids=["decode", "relay"])
def test_malformed_nodes_raise_protocol_error(node: Any, relay: bool) -> None:
    """A frame the controller only relays is checked as strictly: the sender, not the receiver, is blamed."""
    with pytest.raises(ProtocolError):
        recv_raw(raw_frame({"kind": "ok", "body": node, "nbuf": 1}, [b""]), relay=relay)


# --------------------------------------------------------------- relaying ---

def test_relayed_value_embeds_in_a_new_body_bit_exact(pipe) -> None:
    """The controller forwards a worker's outputs undecoded, inside a request of its own."""
    tx, rx = pipe
    outputs = (sample(torch.float32, (64, 33)), [sample(torch.bfloat16, (7,)), sample(torch.int64, (2, 2))])
    t = send_in_thread(tx, "ok", outputs)
    kind, raw = rx.recv(timeout=30, raw=True)
    t.join(30)
    assert kind == "ok" and isinstance(raw, Raw) and len(raw.buffers) == 3
    extra = sample(torch.float64, (3,))
    t = send_in_thread(tx, "check", {"first": extra, "outputs": raw, "against": "trial"})
    kind, got = rx.recv(timeout=30)
    t.join(30)
    assert kind == "check" and got["against"] == "trial"
    assert torch.equal(raw_bytes(got["first"]), raw_bytes(extra))
    a, (b, c) = got["outputs"]
    for x, y in ((a, outputs[0]), (b, outputs[1][0]), (c, outputs[1][1])):
        assert x.dtype == y.dtype and torch.equal(raw_bytes(x), raw_bytes(y))


# ------------------------------------------------------- decode builds no objects ---

ALLOWED_LEAVES = (type(None), bool, int, float, str, torch.Tensor, torch.dtype, Unsupported)


def leaves(value: Any):
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from leaves(v)
    elif isinstance(value, dict):
        assert type(value) is dict and all(type(k) is str for k in value)
        for v in value.values():
            yield from leaves(v)
    else:
        yield value


@pytest.mark.parametrize("body", [
    {"dict": {"__class__": {"unsupported": "os.system"}, "args": ["rm -rf /"]}},
    {"unsupported": "subprocess.Popen", "why": "pretend"},
    {"dict": {"py/object": "builtins.eval", "__reduce__": ["os.system", ["echo hi"]]}},
    [{"tuple": [{"dict": {"a": 1}}, "b"]}],
])
def test_decode_only_builds_plain_values(body: Any) -> None:
    _, got = recv_raw(raw_frame({"kind": "ok", "body": body, "nbuf": 0}))
    for leaf in leaves(got):
        assert type(leaf) in ALLOWED_LEAVES, leaf
        if isinstance(leaf, Unsupported):
            assert type(leaf.type_name) is str


@pytest.mark.parametrize("name", ["load", "save", "Tensor"])
def test_dtype_node_only_yields_dtypes(name: str) -> None:
    try:
        _, got = recv_raw(raw_frame({"kind": "ok", "body": {"dtype": name}, "nbuf": 0}))
    except ProtocolError:
        return
    assert isinstance(got, torch.dtype), f"decode returned {got!r}"


def test_encode_never_pickles() -> None:
    buffers: list[bytes] = []
    tree = encode({"t": torch.ones(2, dtype=torch.bfloat16), "x": Custom()}, buffers)
    text = json.dumps(tree)  # plain JSON all the way down
    assert "payload" not in text and "pickle" not in text
    assert tree["dict"]["x"] == {"unsupported": "Custom"}
    assert len(buffers) == 1 and len(buffers[0]) == 4
    assert decode(tree, buffers)["t"].dtype == torch.bfloat16


# ------------------------------------------------------------- bulk files ---

@pytest.fixture
def bulk_pipe(tmp_path):
    """(writer, reader) channels sharing a bulk folder, as a controller and its workers do."""
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    tx, rx = Channel(r2, w1, str(tmp_path)), Channel(r1, w2, str(tmp_path))
    yield tx, rx, tmp_path
    tx.close()
    rx.close()


def bulk_entry(name: str, length: int) -> bytes:
    return struct.pack("<QH", length | BULK_FLAG, len(name)) + name.encode()


def test_a_large_buffer_travels_as_a_file_not_through_the_pipe(bulk_pipe) -> None:
    """A 64 MB tensor is sent with no reader on the other end (the pipe holds 64 KiB): only its file's name
    crossed it. The receiver's copy is bit-exact, and the file is gone once read."""
    tx, rx, folder = bulk_pipe
    big = sample(torch.float32, (4096, 4096))
    small = sample(torch.int64, (3,))
    tx.send("ok", {"big": big, "small": small})
    assert len(list(folder.iterdir())) == 1
    kind, got = rx.recv(timeout=30)
    assert kind == "ok" and torch.equal(raw_bytes(got["big"]), raw_bytes(big))
    assert torch.equal(got["small"], small)
    assert list(folder.iterdir()) == []


def test_a_relayed_file_reaches_each_receiver_and_is_gone_after(bulk_pipe) -> None:
    """The controller relays a worker's file unread, to the same receiver twice (a trial repeated on the same
    inputs): each send links its own name; the controller's name goes when its ``Raw`` does."""
    tx, rx, folder = bulk_pipe
    big = sample(torch.bfloat16, (1024, 1024))
    tx.send("ok", (big,))
    kind, relayed = rx.recv(timeout=30, raw=True)
    assert isinstance(relayed.buffers[0], BulkFile) and len(list(folder.iterdir())) == 1
    for _ in range(2):
        rx.send("run", {"inputs": relayed})
        kind, got = tx.recv(timeout=30)
        assert kind == "run" and torch.equal(raw_bytes(got["inputs"][0]), raw_bytes(big))
    assert len(list(folder.iterdir())) == 1
    del relayed
    gc.collect()
    assert list(folder.iterdir()) == []


def test_without_room_for_a_file_the_bytes_go_inline(tmp_path) -> None:
    """A sender whose folder cannot take the file (here: it is gone) sends the bytes through the pipe."""
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    tx, rx = Channel(r2, w1, str(tmp_path / "missing")), Channel(r1, w2, str(tmp_path))
    try:
        big = sample(torch.float64, (512, 512))
        assert torch.equal(raw_bytes(roundtrip(tx, rx, big)), raw_bytes(big))
    finally:
        tx.close()
        rx.close()


@pytest.mark.parametrize("name", ["../../etc/passwd", "x", "", "1-abcdefabcdef-1/../../y"])
def test_a_file_name_the_harness_would_not_make_is_refused(bulk_pipe, name: str) -> None:
    tx, rx, folder = bulk_pipe
    frame = raw_frame({"kind": "ok", "nbuf": 1, "body": {"tensor": {"dtype": "uint8", "shape": [4], "buf": 0}}})
    os.write(tx.write_fd, frame + bulk_entry(name, 4))
    with pytest.raises(BadFile, match="not one the harness makes"):
        rx.recv(timeout=5)
    tx.send("ok", 7)  # the frame was read whole: the channel is still in step
    assert rx.recv(timeout=5) == ("ok", 7)


def test_a_file_changed_after_it_was_relayed_fails_its_reader_not_the_controller(bulk_pipe) -> None:
    """A sender that cuts its file short after the controller checked it: the receiver refuses it (BadFile,
    which a worker answers as an error) instead of reading past its end."""
    tx, rx, folder = bulk_pipe
    tx.send("ok", sample(torch.float32, (512, 1024)))
    kind, relayed = rx.recv(timeout=30, raw=True)
    (path,) = folder.iterdir()
    os.truncate(path, 100)
    rx.send("check", {"outputs": relayed})
    with pytest.raises(BadFile, match="holds 100 bytes"):
        tx.recv(timeout=5)
    tx.send("ok", sample(torch.float32, (512, 1024)))  # cut short before the controller's check: refused there
    (path,) = [p for p in folder.iterdir() if p.stat().st_size > 100]
    os.truncate(path, 100)
    with pytest.raises(BadFile, match="holds 100 bytes"):
        rx.recv(timeout=5, raw=True)


def test_a_relayed_file_its_sender_took_back_fails_the_relay_not_the_channel(bulk_pipe) -> None:
    tx, rx, folder = bulk_pipe
    tx.send("ok", sample(torch.float32, (512, 1024)))
    _, relayed = rx.recv(timeout=30, raw=True)
    (path,) = folder.iterdir()
    os.unlink(path)
    with pytest.raises(BadFile, match="No such file"):
        rx.send("check", {"outputs": relayed})
    rx.send("ok", 3)  # nothing of the failed frame was written
    assert tx.recv(timeout=5) == ("ok", 3)


def test_a_worker_answers_a_request_naming_a_bad_file_and_goes_on(tmp_path) -> None:
    """A real reference worker sent a request whose file is gone: PROTOCOL_VIOLATION for that request, and the
    worker answers the next one."""
    worker = WorkerProcess("reference", tmp_path / "r.log")
    try:
        frame = raw_frame({"kind": "check", "nbuf": 1,
                           "body": {"tensor": {"dtype": "uint8", "shape": [1 << 20], "buf": 0}}})
        os.write(worker.channel.write_fd, frame + bulk_entry(bulk.fresh_name(), 1 << 20))
        worker.outstanding.append("check")
        with pytest.raises(WorkerFailure, match="bulk file") as failed:
            worker.finish_request(60)
        assert failed.value.reason is Reason.PROTOCOL_VIOLATION
        assert worker.request("ready", None, 60)["preloaded"] == []
    finally:
        worker.close()


def test_a_trusted_senders_file_is_mapped_not_copied(bulk_pipe) -> None:
    """The candidate's worker maps what the reference and the controller wrote: the same bytes, the file unlinked,
    and what the receiver writes into its tensor stays in its own copy-on-write pages."""
    tx, rx, folder = bulk_pipe
    rx.map_files = True
    big = sample(torch.float32, (1024, 1024))
    tx.send("ok", big)
    _, got = rx.recv(timeout=30)
    assert torch.equal(raw_bytes(got), raw_bytes(big)) and list(folder.iterdir()) == []
    got.zero_()
    tx.send("ok", big)
    _, again = rx.recv(timeout=30)
    assert torch.equal(raw_bytes(again), raw_bytes(big))


def test_a_killed_controllers_folder_is_swept_by_the_next_one(tmp_path) -> None:
    """A controller killed with SIGKILL runs no exit handler, and its tmpfs files would hold memory until reboot:
    the next controller removes a folder whose controller is gone once nothing touched it for ``STALE_S``, and
    leaves a live controller's alone."""
    import signal
    import subprocess
    import sys

    script = (f"from pytest_cudal1 import bulk; bulk.SHARED_MEMORY = {str(tmp_path)!r}; f = bulk.controller_folder(); "
              "open(f + '/' + bulk.fresh_name(), 'wb').write(bytes(1 << 20)); print(f, flush=True); "
              "import time; time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        left = proc.stdout.readline().strip()
        assert os.path.basename(left).startswith(f"{bulk.PREFIX}{proc.pid}-")
        assert bulk.sweep(str(tmp_path), stale_s=0) == []  # its controller is alive
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert os.listdir(left)  # the killed controller's file is still there
    assert bulk.sweep(str(tmp_path)) == []  # touched a moment ago: perhaps a controller this host cannot see
    mine = tmp_path / f"{bulk.PREFIX}{os.getpid()}-x"
    mine.mkdir()
    old = os.stat(left).st_mtime - 2 * bulk.STALE_S
    for folder in (left, mine):
        os.utime(folder, (old, old))
    assert bulk.sweep(str(tmp_path)) == [left]
    assert sorted(os.listdir(tmp_path)) == [mine.name]
