"""MinGPT tanh-GELU as one fused elementwise CuPy RawModule kernel.

0.5*x*(1+tanh(u)) is computed as the identical x / (1 + exp(-2u)), u = sqrt(2/pi)*(x + 0.044715 x^3):
one accurate expf and an IEEE divide per element, no cancellation for negative x, no fast-math.
Streaming float4 grid-stride loop: one read and one write of the tensor.
"""
import cupy as cp
import numpy as np
import torch
import torch.nn as nn

_SRC = r"""
// MinGPT "new GELU": 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))) == x * sigmoid(2u), evaluated
// as x / (1 + exp(-2u)), which is exact algebra and has no cancellation for negative x.
// Accurate expf and IEEE division (no fast-math). float4 grid-stride loop plus a scalar tail.
__device__ __forceinline__ float gelu_tanh_f(float x) {
    const float c0 = -1.5957691216057308f;    // -2*sqrt(2/pi)
    const float c1 = -0.07135481627159121f;   // -2*sqrt(2/pi)*0.044715
    const float t = x * fmaf(c1, x * x, c0);  // -2u
    return x / (1.0f + expf(t));
}

extern "C" __global__ void __launch_bounds__(256)
gelu_tanh_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool vec = ((((unsigned long long)x | (unsigned long long)y) & 15ull) == 0);
    long long done = 0;
    if (vec) {
        const long long n4 = n >> 2;
        const float4* x4 = reinterpret_cast<const float4*>(x);
        float4* y4 = reinterpret_cast<float4*>(y);
        for (long long i = tid; i < n4; i += stride) {
            float4 v = __ldcs(x4 + i);
            v.x = gelu_tanh_f(v.x); v.y = gelu_tanh_f(v.y); v.z = gelu_tanh_f(v.z); v.w = gelu_tanh_f(v.w);
            __stcs(y4 + i, v);
        }
        done = n4 << 2;
    }
    for (long long i = done + tid; i < n; i += stride) y[i] = gelu_tanh_f(x[i]);
}
"""

_funcs = {}


def _fn(name):
    dev = cp.cuda.Device().id
    key = (dev, name)
    if key not in _funcs:
        if (dev, None) not in _funcs:
            _funcs[(dev, None)] = cp.RawModule(code=_SRC, options=("--std=c++17",))
        _funcs[key] = _funcs[(dev, None)].get_function(name)
    return _funcs[key]


def _stream(t):
    return cp.cuda.ExternalStream(torch.cuda.current_stream(t.device).cuda_stream)

def _gelu(x: torch.Tensor) -> torch.Tensor:
    assert x.is_cuda and x.dtype == torch.float32
    x = x.detach().contiguous()
    n = x.numel()
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    with cp.cuda.Device(x.device.index), _stream(x):
        xa = cp.from_dlpack(x)
        y = cp.empty(x.shape, dtype=cp.float32)
        if n:
            blocks = max(1, min((n // 4 + 255) // 256, sms * 32))
            _fn("gelu_tanh_kernel")((blocks,), (256,), (xa, y, np.int64(n)))
        return torch.from_dlpack(y)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _gelu(x)
