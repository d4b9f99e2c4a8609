"""Process-wide state a candidate may change: settings, environment variables, the persisting-L2 limit.

Read before and after candidate code runs; a change is a flag (``state_changes``), which the controller
turns into a verdict unless the user allowed that algorithm-selection setting (``pytest_cudal1.allowances``).
"""

from __future__ import annotations

import os
from typing import Any

import torch

def settings() -> dict[str, Any]:
    """Process-wide settings that change numerics or speed of anything run later."""
    s: dict[str, Any] = {
        "torch.backends.cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction":
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction":
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        "torch.backends.cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "torch.backends.cudnn.benchmark": torch.backends.cudnn.benchmark,
        "torch.backends.cudnn.deterministic": torch.backends.cudnn.deterministic,
        "torch.backends.cudnn.enabled": torch.backends.cudnn.enabled,
        "torch.get_float32_matmul_precision()": torch.get_float32_matmul_precision(),
        "torch.get_num_threads()": torch.get_num_threads(),
        "torch.get_default_dtype()": str(torch.get_default_dtype()),
        "torch.are_deterministic_algorithms_enabled()": torch.are_deterministic_algorithms_enabled(),
        "torch.is_grad_enabled()": torch.is_grad_enabled(),
        # TorchScript's fusers and optimizing executor: how every scripted function run later is compiled
        # (CUDA-L1's L3/22 turns GPU fusion on at import).
        "torch._C._jit_can_fuse_on_gpu()": torch._C._jit_can_fuse_on_gpu(),
        "torch._C._jit_can_fuse_on_cpu()": torch._C._jit_can_fuse_on_cpu(),
        "torch._C._jit_texpr_fuser_enabled()": torch._C._jit_texpr_fuser_enabled(),
        "torch._C._get_graph_executor_optimize()": torch._C._get_graph_executor_optimize(),
    }
    for k, v in os.environ.items():
        if watched_env(k):
            s[f"env:{k}"] = v
    limit = persisting_l2_limit()
    if limit is not None:
        s["cudaLimitPersistingL2CacheSize"] = limit
    return s


# Environment variables that configure numerics, threads, devices, allocators or kernel compilers of the
# libraries a candidate runs on (read after start-up too). Names ending like a location (a cache folder, a
# tool's path) are left out: libraries fill those in for themselves (inductor sets TORCHINDUCTOR_CACHE_DIR,
# TRITON_PTXAS_PATH, CUDA_HOME), and a location changes no result. Other variables change no library's
# behaviour (inductor's _TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR, a candidate's own names).
WATCHED_ENV_PREFIXES = ("CUDA_", "CUBLAS", "CUDNN", "NVIDIA_", "PYTORCH_", "TORCH_", "OMP_", "MKL_", "OPENBLAS_",
                        "KMP_", "GOMP_", "MALLOC_", "TRITON_", "NUMBA_", "CUPY_", "NCCL_")
LOCATION_SUFFIXES = ("_DIR", "_PATH", "_HOME")

# Settings that change the numerics of later work: a candidate that sets them is judged on lower precision.
NUMERIC_SETTINGS = frozenset({
    "torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32",
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
    "torch.get_float32_matmul_precision()", "torch.get_default_dtype()",
    "env:NVIDIA_TF32_OVERRIDE", "env:TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "env:TRITON_F32_DEFAULT",
})


def watched_env(name: str) -> bool:
    return name.startswith(WATCHED_ENV_PREFIXES) and not name.endswith(LOCATION_SUFFIXES)


def changed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, str]:
    """Each setting that differs, by key, described as ``key: before -> after``."""
    keys = sorted(set(before) | set(after))
    return {k: f"{k}: {before.get(k, '<unset>')!r} -> {after.get(k, '<unset>')!r}"
            for k in keys if before.get(k) != after.get(k)}


def state_changes(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """Flags for changed settings: PRECISION_SETTING_MODIFIED for numeric ones, GLOBAL_STATE_MODIFIED for the rest.

    Each flag carries its ``settings`` (key -> description), so the controller can accept the
    algorithm-selection flags a user allowed (``pytest_cudal1.allowances``) without the worker
    knowing which.
    """
    changes = changed(before, after)
    flags = []
    for code, keys in (("PRECISION_SETTING_MODIFIED", [k for k in changes if k in NUMERIC_SETTINGS]),
                       ("GLOBAL_STATE_MODIFIED", [k for k in changes if k not in NUMERIC_SETTINGS])):
        if keys:
            flags.append({"code": code, "detail": "; ".join(changes[k] for k in keys[:6]),
                          "settings": {k: changes[k] for k in keys}})
    return flags


_cudart: Any = None


def _runtime() -> Any:
    """libcudart as loaded by torch (found in this process's maps), for the persisting-L2 limit."""
    global _cudart
    if _cudart is None:
        import ctypes

        _cudart = False
        try:
            with open("/proc/self/maps") as f:
                paths = sorted({ln.split()[-1] for ln in f if "libcudart" in ln})
            if paths:
                _cudart = ctypes.CDLL(paths[0])
        except OSError:
            pass
    return _cudart or None


CUDA_LIMIT_PERSISTING_L2 = 0x06


def persisting_l2_limit() -> int | None:
    if not torch.cuda.is_initialized():
        return None
    rt = _runtime()
    if rt is None:
        return None
    import ctypes

    value = ctypes.c_size_t(0)
    if rt.cudaDeviceGetLimit(ctypes.byref(value), CUDA_LIMIT_PERSISTING_L2) != 0:
        return None
    return int(value.value)


def reset_persisting_l2() -> None:
    """Outside the timer: no lines persist into the next sample."""
    rt = _runtime() if torch.cuda.is_initialized() else None
    if rt is not None:
        rt.cudaCtxResetPersistingL2Cache()
