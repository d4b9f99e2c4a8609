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


_cudart().cudaDeviceSetLimit(0x06, ctypes.c_size_t(32 << 20))  # cudaLimitPersistingL2CacheSize


class ModelNew(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)
