"""Hand judged timings to pytest-benchmark, so its storage, comparison and histograms work.

Each judged item becomes one benchmark group with two benchmarks, reference
and candidate, whose rounds are the paired samples already measured (seconds
per call) under the ``kernel`` measure, and two more, ``reference:call`` and
``candidate:call``, for the ``call`` measure. Only the controlling process adds them (under xdist the workers'
records arrive with their reports), so one saved file holds every item. The
storage folder is kept per GPU, and machine_info names GPU, driver and CUDA.
Its tables print only when asked (``--cudal1-benchmark-tables``): the verdicts
are what a run is for. ``--benchmark-compare-fail`` judges candidate rows only;
reference rows are context (unchanged code "regresses" by machine noise).
Nothing here is registered when pytest-benchmark is not loaded.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from pytest_cudal1 import environment


class _Source:
    """The attributes pytest-benchmark's Metadata reads from a fixture."""

    def __init__(self, name: str, fullname: str, group: str, extra_info: dict[str, Any]) -> None:
        self.name, self.fullname, self.group, self.extra_info = name, fullname, group, extra_info
        self.param = None
        self.params = None
        self.cprofile_stats = None
        self.has_error = False


def session(config: pytest.Config) -> Any:
    return getattr(config, "_benchmarksession", None)


def add_record(config: pytest.Config, nodeid: str, record: dict[str, Any]) -> None:
    """Two benchmarks (reference, candidate) for one judged item, from its recorded samples."""
    bs = session(config)
    timing = record.get("timing")
    if bs is None or timing is None or hasattr(config, "workerinput"):
        return
    from pytest_benchmark.stats import Metadata

    call = record.get("call_timing")
    extra = {"speedup": timing["speedup"], "speedup_ci": timing["speedup_ci"], "verdict": record["verdict"]["reason"],
             "method": timing["method"], "gpu_state": timing.get("gpu_state", {}), "backend": record["backend"],
             "call_speedup": call["speedup"] if call else None, "call_speedup_ci": call["speedup_ci"] if call else None,
             "call_method": call["method"] if call else None, "reward_measure": record.get("reward_measure", "kernel")}
    for suffix, measured in (("", timing), (":call", call)):
        for side in ("reference", "candidate"):
            if measured is None:
                continue
            summary = measured[side]
            src = _Source(f"{nodeid}[{side}{suffix}]", f"{nodeid}[{side}{suffix}]", nodeid, extra)
            meta = Metadata(src, iterations=summary["calls_per_sample"], options={"timer": summary["clock"]})
            for ms in summary["samples_ms"]:
                meta.stats.update(ms / 1e3)
            bs.benchmarks.append(meta)


class MachineInfo:
    """pytest-benchmark's machine_info hook; a plugin object of its own, so ``-p no:benchmark`` works."""

    @pytest.hookimpl(trylast=True)
    def pytest_benchmark_update_machine_info(self, config: pytest.Config, machine_info: dict[str, Any]) -> None:
        machine_info.update(gpu_machine_info())


def configure(config: pytest.Config, show_tables: bool) -> None:
    """Before pytest-benchmark's own configure: storage per GPU, GPU facts, tables only when asked."""
    keep_storage_per_gpu(config)
    config.pluginmanager.register(MachineInfo(), "cudal1-benchmark-machine-info")
    if not show_tables and not getattr(config.option, "benchmark_verbose", False):
        config.option.benchmark_quiet = True


def judge_only_candidates(config: pytest.Config) -> None:
    """Drop reference rows from pytest-benchmark's regressions, found in its sessionfinish and raised later."""
    bs = session(config)
    if bs is not None:
        bs.performance_regressions = [r for r in bs.performance_regressions if "[reference]" not in r[0]]


def gpu_slug() -> str:
    facts = environment.gpu_facts()
    return re.sub(r"[^A-Za-z0-9]+", "_", facts["gpu"]).strip("_") if facts else "cpu"


def keep_storage_per_gpu(config: pytest.Config) -> None:
    """Save and compare under ``<storage>/<gpu>/`` so runs on different GPUs never mix.

    Must run before pytest-benchmark's own ``pytest_configure``, which opens the storage and loads
    the runs to compare against.
    """
    storage = getattr(config.option, "benchmark_storage", None)
    if isinstance(storage, str) and storage.startswith("file://"):
        suffix = f"/{gpu_slug()}"
        if not storage.rstrip("/").endswith(suffix):
            config.option.benchmark_storage = storage.rstrip("/") + suffix


def gpu_machine_info() -> dict[str, Any]:
    facts = environment.describe()
    return {"gpu": facts.get("gpu", "none"), "gpu_driver": facts.get("driver"), "cuda": facts.get("cuda"),
            "torch": facts.get("torch"), "compute_capability": facts.get("compute_capability")}
