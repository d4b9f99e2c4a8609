"""Facts about the machine a record was measured on: GPU, driver, CUDA, torch.

GPU facts come from NVML (nvidia-ml-py), so the controller never creates a
CUDA context of its own. Without NVML or a GPU every function returns what it
can and never raises.
"""

from __future__ import annotations

import functools
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
def gpu_facts(index: int = 0) -> dict[str, Any]:
    """Name, driver, compute capability and memory of GPU ``index``; {} without a GPU."""
    nvml = _nvml()
    if nvml is None:
        return {}
    try:
        if nvml.nvmlDeviceGetCount() <= index:
            return {}
        h = nvml.nvmlDeviceGetHandleByIndex(index)
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
    facts.update({"torch": torch.__version__, "cuda": torch.version.cuda, "host": platform.node(),
                  "python": platform.python_version()})
    facts["device"] = "cuda" if facts.get("gpu") else "cpu"
    return facts
