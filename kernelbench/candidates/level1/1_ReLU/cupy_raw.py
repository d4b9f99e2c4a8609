"""ReLU as a CuPy RawKernel launched on torch's current CUDA stream (GPU only)."""
import cupy as cp
import torch
import torch.nn as nn

_KERNEL = cp.RawKernel(
    r"""
extern "C" __global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ out, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaxf(x[i], 0.0f);
}
""",
    "relu_kernel",
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        threads = 256
        with cp.cuda.Device(x.device.index), cp.cuda.ExternalStream(torch.cuda.current_stream(x.device).cuda_stream):
            _KERNEL(((n + threads - 1) // threads,), (threads,), (cp.asarray(x), cp.asarray(out), cp.int64(n)))
        return out
