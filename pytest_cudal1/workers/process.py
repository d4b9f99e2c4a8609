"""Controller side of a worker: spawn, request with a deadline, kill the whole group.

A worker is its own process session, so a kill takes every child it started
(compilers, thread pools, daemons). Its stdout and stderr go to a log file,
never to the channel, and the log's tail becomes evidence when it dies.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from pytest_cudal1 import bulk
from pytest_cudal1.reasons import Reason
from pytest_cudal1.wire import Channel, ChannelClosed, ChannelTimeout, ProtocolError, Raw, decode

ERROR_KIND_REASONS = {
    "syntax": Reason.SYNTAX_ERROR,
    "compile": Reason.COMPILE_ERROR,
    "oom": Reason.OUT_OF_MEMORY,
    "cuda": Reason.CUDA_ERROR,
    "exit": Reason.EARLY_EXIT,
    "python": Reason.RUNTIME_ERROR,
    "bulk": Reason.PROTOCOL_VIOLATION,  # a request named a bulk file that was gone or changed (``wire.BadFile``)
}


# Idle OpenMP threads of the worker not being timed would otherwise spin on the
# cores the timed one needs (seen here: 5 ms instead of 0.02 ms on 2 cores).
QUIET_CPU = {"OMP_WAIT_POLICY": "PASSIVE"}
TOKEN_VAR = "CUDAL1_WORKER_TOKEN"
# Libraries a worker imports at start-up, before its first request (``runtime.warm_start``): comma-separated.
PRELOAD_VAR = "CUDAL1_WORKER_PRELOAD"


EXIT_GRACE_S = 5.0  # a worker asked to exit has this long before its group is killed
PIPE_BYTES = 1 << 20  # Linux's default unprivileged maximum; 16x fewer switches than 64 KiB for big tensors


def _widen(fd: int) -> None:
    """Enlarge a pipe's buffer where the platform allows (``benchmarks/pipe_throughput.py``: a modest gain)."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (ImportError, AttributeError, OSError):
        pass


HARNESS_DIR = str(Path(__file__).resolve().parents[1])  # frames of the harness's own code

# What the candidate's code was doing in the requests that run it, for a worker that died there.
REQUEST_PHASES = {
    "ready": "starting up (no candidate code yet)", "load": "importing the candidate",
    "build": "constructing ModelNew", "warm_up": "the warm-up call",
    "run": "a correctness call", "place": "setting up the eager timing placements, one untimed pass each",
    "capture": "capturing the calls as CUDA graphs", "set_up": "setting up a timed sample (no candidate code)",
    "time": "a timed sample", "profile": "the profiled call",
}

# Requests on the controller's clock (``timing.measure_pairs``): it waits for their answers awake (``Channel.wait``).
# Asleep through a Triton-interpreter candidate's 240 ms samples, it woke 0.35 ms later after them than after its
# reference's 0.2 ms ones (2-core CPU, session 34): time the forged-timer rule counted as the candidate's.
CLOCKED = frozenset({"time", "time_idle"})
AWAKE_TICK_S = 0.0003


def crash_site(log_tail: str) -> str:
    """``: <the error a library printed> at <innermost non-harness frame>`` from a dead worker's log, or ''.

    The workers' fault handler writes the Python stack on a fatal signal (innermost call first);
    C++ libraries print ``what(): ...`` before aborting.
    """
    what = next((ln.split("what():", 1)[1].strip() for ln in reversed(log_tail.splitlines()) if "what():" in ln), "")
    fatal = log_tail.rfind("Fatal Python error")
    frames = [] if fatal < 0 else [ln.strip() for ln in log_tail[fatal:].splitlines()
                                   if ln.strip().startswith('File "') and HARNESS_DIR not in ln]
    parts = [p for p in (what[:300], f"at {frames[0]}" if frames else "") if p]
    return ": " + " ".join(parts) if parts else ""


class WorkerFailure(Exception):
    """A request did not return normally; carries the reason code and evidence."""

    def __init__(self, reason: Reason, message: str, evidence: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.evidence = evidence or {}


class WorkerProcess:
    """One worker process and its channel."""

    def __init__(self, role: str, log_path: Path, env: dict[str, str] | None = None, cwd: str | None = None,
                 preload: tuple[str, ...] = ()) -> None:
        self.role = role
        self.preload = preload  # the libraries it imports at start-up, before any request
        self.outstanding: list[str] = []  # kinds of the requests ``start_request`` sent and not yet answered, in order
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        for fd in (to_worker_w, from_worker_w):
            _widen(fd)
        # Inherited by every descendant, even one that leaves the process group: how strays are found.
        self.token = secrets.token_hex(8)
        folder = bulk.controller_folder()
        env = {**(env or {}), TOKEN_VAR: self.token, PRELOAD_VAR: ",".join(preload), bulk.FOLDER_VAR: folder or ""}
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", f"pytest_cudal1.workers.{role}", str(to_worker_r), str(from_worker_w)],
                pass_fds=(to_worker_r, from_worker_w),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, env={**QUIET_CPU, **os.environ, **(env or {})}, cwd=cwd,
            )
        os.close(to_worker_r)
        os.close(from_worker_w)
        self.channel = Channel(from_worker_r, to_worker_w, folder)
        self.screen: Callable[[Any], Any] = lambda reply: reply  # the controller's policy on a reply's flags
        self.exit_asked: float | None = None  # ``time.monotonic()`` when ``ask_exit`` asked

    def request(self, kind: str, body: Any = None, timeout: float | None = None, raw: bool = False) -> Any:
        """Send one request; return its body or raise ``WorkerFailure``.

        With ``raw`` the body comes back as a checked ``wire.Raw`` for relaying to another worker.
        """
        assert not self.outstanding, f"{self.role} worker still owes the answers to {self.outstanding}"
        self.start_request(kind, body)
        return self.finish_request(timeout, raw)

    @property
    def pending(self) -> str | None:
        """The kind of the oldest request sent by ``start_request`` and not yet answered, or None."""
        return self.outstanding[0] if self.outstanding else None

    def start_request(self, kind: str, body: Any = None) -> None:
        """Send a request without waiting for it: the worker works on it while the controller does other things.

        Several may be outstanding; the worker answers them in order, and ``finish_request`` reads the oldest
        answer (the deadline counts from then).
        """
        with self._failures(kind, None):
            self.channel.send(kind, body)
        self.outstanding.append(kind)

    def finish_request(self, timeout: float | None = None, raw: bool = False) -> Any:
        """The answer to the oldest request ``start_request`` sent: its body, or ``WorkerFailure`` as ``request``
        raises (after which no answer is owed: the worker is gone or the channel's order is lost)."""
        assert self.outstanding, "no request is outstanding"
        kind = self.outstanding.pop(0)
        try:
            return self._answer(kind, timeout, raw)
        except WorkerFailure:
            self.outstanding.clear()
            raise

    def finish_all(self, timeout: float | None = None) -> Any:
        """Every outstanding answer read, in order; the last one's body (None if none was owed)."""
        answer = None
        while self.outstanding:
            answer = self.finish_request(timeout)
        return answer

    def _answer(self, kind: str, timeout: float | None, raw: bool) -> Any:
        with self._failures(kind, timeout):
            if kind in CLOCKED and timeout is not None:
                self.channel.wait(timeout, AWAKE_TICK_S)
            reply, payload = self.channel.recv(timeout, raw=raw)
            if reply == "error" and isinstance(payload, Raw):
                payload = decode(payload.tree, payload.buffers)
        if reply == "ok":
            return payload if raw else self.screen(payload)
        if reply == "error" and isinstance(payload, dict):
            kind_ = str(payload.get("kind", "python"))
            reason = ERROR_KIND_REASONS.get(kind_, Reason.RUNTIME_ERROR)
            message = f"{payload.get('type', 'Error')}: {payload.get('message', '')}"
            raise WorkerFailure(reason, message, {"traceback": payload.get("traceback", ""), "log_tail": self.log_tail(),
                                                  "worker": self.role})
        self.kill()
        raise WorkerFailure(Reason.PROTOCOL_VIOLATION, f"unexpected reply {reply!r} to {kind!r}")

    @contextlib.contextmanager
    def _failures(self, kind: str, timeout: float | None) -> Iterator[None]:
        """What goes wrong on the channel during ``kind``, as the ``WorkerFailure`` that names it."""
        try:
            yield
        except ChannelTimeout:
            self.kill()
            raise WorkerFailure(Reason.TIMEOUT, f"{kind!r} did not answer within {timeout:.0f} s; process group killed",
                                {"log_tail": self.log_tail()}) from None
        except (ChannelClosed, BrokenPipeError):
            raise self._death(kind) from None
        except ProtocolError as exc:
            self.kill()
            raise WorkerFailure(Reason.PROTOCOL_VIOLATION, f"malformed reply to {kind!r}: {exc}") from None

    def _death(self, kind: str) -> WorkerFailure:
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        self.kill()
        tail = self.log_tail()
        if code == 0:
            return WorkerFailure(Reason.EARLY_EXIT, f"worker exited with status 0 during {kind!r}", {"log_tail": tail})
        if code is not None and code < 0:
            how = f"killed by {signal.Signals(-code).name}"
        else:
            how = f"exited with status {code}"
        reason = Reason.CUDA_ERROR if "CUDA error" in tail or "illegal memory access" in tail else Reason.CRASH
        during = f"{kind!r} ({REQUEST_PHASES[kind]})" if kind in REQUEST_PHASES else repr(kind)
        return WorkerFailure(reason, f"worker {how} during {during}{crash_site(tail)}",
                             {"exit_code": code, "log_tail": tail})

    def log_tail(self, limit: int = 3000) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return data[-limit:].decode("utf-8", "replace")

    def strays(self) -> list[int]:
        """Descendants that left the worker's process group (double fork + setsid) and still run."""
        found = []
        needle = f"{TOKEN_VAR}={self.token}".encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == self.proc.pid:
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if needle in f.read().split(b"\0") and os.getpgid(int(entry)) != self.proc.pid:
                        found.append(int(entry))
            except (OSError, ProcessLookupError):
                continue
        return found

    def kill(self) -> None:
        """Kill the worker's whole process group, and any stray that escaped it, and reap the worker."""
        for pid in self.strays():
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.channel.close()

    def close(self) -> None:
        """Ask politely, then make sure the group is gone."""
        self.ask_exit()
        self.reap()

    def ask_exit(self) -> None:
        """Ask the worker to exit, without waiting for it: ``reap`` ends it."""
        if self.exit_asked is None:
            self.exit_asked = time.monotonic()
            if self.proc.poll() is None:
                try:
                    self.channel.send("exit")
                except OSError:
                    pass

    def reap(self) -> None:
        """Wait what is left of ``EXIT_GRACE_S`` since ``ask_exit`` for the worker to exit, then kill its group."""
        if self.proc.poll() is None and self.exit_asked is not None:
            try:
                self.proc.wait(timeout=max(0.0, EXIT_GRACE_S - (time.monotonic() - self.exit_asked)))
            except subprocess.TimeoutExpired:
                pass
        self.kill()


class Closing:
    """Workers asked to exit and not yet reaped.

    A worker's exit on a GPU is mostly its CUDA context's teardown (about 0.6 s on an H100), and a new task ends a
    candidate worker and a reference worker: asked together, they end side by side, while the next item starts.
    ``reap`` ends them before anything that needs them gone: a reference's probe (it reads the free memory), the
    next candidate's calls, timing."""

    def __init__(self) -> None:
        self.workers: list[WorkerProcess] = []

    def add(self, worker: WorkerProcess) -> None:
        worker.ask_exit()
        self.workers.append(worker)

    def reap(self) -> None:
        while self.workers:
            self.workers.pop(0).reap()
