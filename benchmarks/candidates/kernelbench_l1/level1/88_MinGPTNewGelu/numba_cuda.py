"""MinGPT tanh-GELU as one fused Numba CUDA elementwise kernel.

0.5*x*(1+tanh(u)) is evaluated as the algebraically identical x / (1 + exp(-2u)),
u = sqrt(2/pi)*(x + 0.044715 x^3), with every constant typed float32 so the arithmetic stays FP32
(libdevice expf, no fast-math); the exponent is clamped at 80 so exp never overflows. Grid-stride loop over the flattened tensor; launched on torch's
current stream.
"""
import math

import numpy as np
import torch
import torch.nn as nn
from numba import cuda

_C0 = np.float32(-1.5957691216057308)    # -2*sqrt(2/pi)
_C1 = np.float32(-0.07135481627159121)   # -2*sqrt(2/pi)*0.044715
_ONE = np.float32(1.0)
_TMAX = np.float32(80.0)   # exp(80) is finite; beyond it x / (1 + exp(t)) is ~1e-35 * x, i.e. 0


@cuda.jit
def _gelu_kernel(x, y):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    n = x.shape[0]
    while i < n:
        v = x[i]
        t = v * (_C0 + _C1 * v * v)
        if t > _TMAX:
            t = _TMAX
        y[i] = v / (_ONE + math.exp(t))
        i += stride


def _stream():
    ptr = torch.cuda.current_stream().cuda_stream
    return cuda.external_stream(ptr) if ptr else cuda.default_stream()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.detach().contiguous()
        y = torch.empty(x.shape, device=x.device, dtype=x.dtype)
        n = x.numel()
        if n:
            sms = torch.cuda.get_device_properties(x.device).multi_processor_count
            blocks = max(1, min((n + 255) // 256, sms * 32))
            _gelu_kernel[blocks, 256, _stream()](cuda.as_cuda_array(x.view(-1)), cuda.as_cuda_array(y.view(-1)))
        return y
