"""Linear + ReLU + scale: torch.mm for the GEMM, then a fused bias/ReLU/scale Numba CUDA epilogue (GPU or simulator)."""
import torch
import torch.nn as nn
from numba import cuda


@cuda.jit
def bias_relu_scale_kernel(bias, scale, y):
    i = cuda.grid(1)
    n, cols, stride = y.size, bias.size, cuda.gridsize(1)
    while i < n:
        v = y[i] + bias[i % cols]
        y[i] = v * scale if v > 0.0 else 0.0
        i += stride


THREADS = 64
ITEMS_PER_THREAD = 32


def _elementwise_blocks(n):
    return max(1, -(-n // (THREADS * ITEMS_PER_THREAD)))


def _launch(kernel, blocks, threads, out, *args):
    """Run kernel(*args, out) on torch tensors: zero-copy on torch's stream on CUDA, via host copies under the simulator."""
    out, args = out.detach(), [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
    if out.is_cuda:
        stream = cuda.external_stream(torch.cuda.current_stream().cuda_stream)
        views = [cuda.as_cuda_array(a) if isinstance(a, torch.Tensor) else a for a in args]
        kernel[blocks, threads, stream](*views, cuda.as_cuda_array(out))
    else:
        views = [cuda.to_device(a.numpy()) if isinstance(a, torch.Tensor) else a for a in args]
        d_out = cuda.to_device(out.numpy())
        kernel[blocks, threads](*views, d_out)
        d_out.copy_to_host(out.numpy())
    return out


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.mm(x, self.linear.weight.t())
        blocks = _elementwise_blocks(y.numel())
        return _launch(bias_relu_scale_kernel, blocks, THREADS, y.view(-1), self.linear.bias, self.scale).view_as(y)
