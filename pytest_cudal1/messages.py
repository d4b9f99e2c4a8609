"""What a verdict's message says: memory sizes, intervals, and which reason a worker failure becomes.

Kept apart from the judge so that each check's wording lives in one place and the
tests can read the rules (which failure is a COMPILE_TIMEOUT, how an OOM is told).
"""

from __future__ import annotations

import re
from typing import Any

from kernelbench.loaders import Task
from pytest_cudal1.reasons import Reason
from pytest_cudal1.records import PairedTiming, Verdict
from pytest_cudal1.workers.process import WorkerFailure


def gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def too_large_message(task: Task, probe: dict[str, Any]) -> str:
    """Why the reference cannot run here, with how much memory the task needs (``ReferenceWorker.probe``)."""
    where = "device" if str(probe.get("device", "")).startswith("cuda") else "host"
    text = (f"the reference of {task.id} cannot run on this machine: the task needs about {gb(probe['need_bytes'])} "
            f"of {where} memory ({gb(probe['input_bytes'])} of inputs, {gb(probe['output_bytes'])} of outputs, held "
            f"several times over by its first trial) and {gb(probe['available_bytes'])} is available")
    if probe.get("oom"):
        text += f"; its first trial, run alone before any candidate, ran out of memory ({probe['oom'][:200]})"
    return text + "; a harness error, not the candidate's: skipped, no reward"


_ASKED = (re.compile(r"[Tt]ried to allocate ([\d.]+) ?([KMGT]i?B)"), re.compile(r"tried to allocate (\d+) bytes"))
_UNITS = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}


def asked_bytes(message: str) -> int | None:
    """The allocation an out-of-memory message names (torch's CUDA and CPU allocators' wording), or None."""
    m = _ASKED[0].search(message)
    if m:
        return int(float(m[1]) * _UNITS[m[2]])
    m = _ASKED[1].search(message)
    return int(m[1]) if m else None


def memory_message(held: dict[str, dict[str, int] | None], asked: int | None, headroom: int,
                   asker: str = "candidate") -> str:
    """What the harness held when a worker (``asker``: the candidate's, or the reference's beside it) ran out of
    memory, and what that worker asked for."""
    ref, cand = held.get("reference"), held.get("candidate")
    who = "the candidate" if asker == "candidate" else "the reference"
    parts = [f"{who} asked for {gb(asked)}" if asked is not None else f"{who}'s request size is unknown"]
    if ref is not None:
        parts.append(f"the harness's reference worker held {gb(ref['held_bytes'])} "
                     f"({gb(ref['timing_bytes'])} of it timing buffers)")
    if cand is not None:
        parts.append(f"the harness's timing buffers in the candidate's worker held {gb(cand['timing_bytes'])} "
                     f"(that worker held {gb(cand['held_bytes'])} in all)")
    parts.append(f"the headroom left for the candidate while timing: {gb(headroom)}")
    return "; ".join(parts)


def interval_text(t: PairedTiming) -> str:
    return f"[{t.speedup_ci[0]:.2f}, {t.speedup_ci[1]:.2f}]"


def compile_reason(exc: WorkerFailure, otherwise: Reason) -> Reason:
    """A step under the compile timeout that ran past it is COMPILE_TIMEOUT; a Python error is ``otherwise``."""
    if exc.reason is Reason.TIMEOUT:
        return Reason.COMPILE_TIMEOUT
    return otherwise if exc.reason is Reason.RUNTIME_ERROR else exc.reason


def flag_verdict(flags: list[dict[str, str]], when: str) -> Verdict:
    """The first flag a worker raised becomes the verdict; the others go into the evidence."""
    first = flags[0]
    return Verdict(Reason(first["code"]), f"{first['detail']} ({when})", {"flags": flags})
