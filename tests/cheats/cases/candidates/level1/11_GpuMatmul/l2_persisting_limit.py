"""Cache warmth through the persisting-L2 window (exploit #9/#7): raises the device's persisting-L2 limit
at import so that later calls could pin their operands in L2 across the harness's flush. A process-wide
setting the reference would also feel. Expect GLOBAL_STATE_MODIFIED.
"""
import ctypes

import torch
import torch.nn as nn

torch.cuda.init()


def _cudart():
    for line in open("/proc/self/maps"):
        if "libcudart" in line:
            return ctypes.CDLL(line.split()[-1])
    return ctypes.CDLL("libcudart.so")


# As large as the device allows, at most 32 MiB: 32 MiB is over the H100's maximum, where the call failed and its
# sticky error made the candidate a CUDA_ERROR instead (session 25).
_max = ctypes.c_int(0)
_cudart().cudaDeviceGetAttribute(ctypes.byref(_max), 108, torch.cuda.current_device())  # MaxPersistingL2CacheSize
_cudart().cudaDeviceSetLimit(0x06, ctypes.c_size_t(min(32 << 20, _max.value)))  # cudaLimitPersistingL2CacheSize


class ModelNew(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)
