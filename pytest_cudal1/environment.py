"""Facts about the machine a record was measured on: GPU, driver, CUDA, torch.

GPU facts come from NVML (nvidia-ml-py), so the controller never creates a
CUDA context of its own. Without NVML or a GPU every function returns what it
can and never raises.
"""

from __future__ import annotations

import functools
import os
import platform
from typing import Any


def _nvml() -> Any:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:  # noqa: BLE001 - no library, no driver or no GPU: all mean "no NVML"
        return None


@functools.lru_cache(maxsize=1)
def gpu_facts(index: int | None = None) -> dict[str, Any]:
    """Name, driver, compute capability and memory of GPU ``index``; {} without a GPU."""
    nvml = _nvml()
    if nvml is None:
        return {}
    try:
        if nvml.nvmlDeviceGetCount() == 0:
            return {}
        h = nvml.nvmlDeviceGetHandleByIndex(gpu_index() if index is None else index)
        major, minor = nvml.nvmlDeviceGetCudaComputeCapability(h)
        name = nvml.nvmlDeviceGetName(h)
        return {
            "gpu": name.decode() if isinstance(name, bytes) else name,
            "driver": _text(nvml.nvmlSystemGetDriverVersion()),
            "compute_capability": f"{major}.{minor}",
            "memory_bytes": int(nvml.nvmlDeviceGetMemoryInfo(h).total),
        }
    except Exception:  # noqa: BLE001
        return {}


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def gpu_count() -> int:
    nvml = _nvml()
    try:
        return int(nvml.nvmlDeviceGetCount()) if nvml is not None else 0
    except Exception:  # noqa: BLE001
        return 0


def has_gpu() -> bool:
    if gpu_facts():
        return True
    import torch

    return bool(torch.cuda.is_available())


@functools.lru_cache(maxsize=1)
def describe() -> dict[str, Any]:
    """What goes into every record's ``environment``."""
    import torch

    facts = {k: v for k, v in gpu_facts().items() if v is not None}
    facts.update({"torch": str(torch.__version__), "cuda": torch.version.cuda, "host": platform.node(),
                  "python": platform.python_version()})
    facts["device"] = "cuda" if facts.get("gpu") else "cpu"
    if "CUDA_VISIBLE_DEVICES" in os.environ:  # the GPU an xdist worker or a Ray actor was given
        facts["cuda_visible_devices"] = os.environ["CUDA_VISIBLE_DEVICES"]
    return facts


def gpu_index() -> int:
    """NVML index of the GPU this process's CUDA work lands on (first of CUDA_VISIBLE_DEVICES)."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


def gpu_state() -> dict[str, Any]:
    """Clocks, temperature, power and clock-event reasons now; {} without NVML."""
    nvml = _nvml()
    if nvml is None:
        return {}
    try:
        h = nvml.nvmlDeviceGetHandleByIndex(gpu_index())
        state = {
            "sm_clock_mhz": nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM),
            "mem_clock_mhz": nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_MEM),
            "temperature_c": nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU),
            "power_w": nvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
        }
        state["clock_event_reasons"] = hex(nvml.nvmlDeviceGetCurrentClocksEventReasons(h))
        return state
    except Exception:  # noqa: BLE001 - a query the driver does not support: record what we have
        return {}
