"""Conv2d + ReLU + bias add: torch conv2d, then a fused ReLU/bias Numba CUDA epilogue in place (GPU or simulator)."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from numba import cuda


@cuda.jit
def relu_add_kernel(bias, plane, y):
    i = cuda.grid(1)
    n, channels, stride = y.size, bias.size, cuda.gridsize(1)
    while i < n:
        v = y[i]
        y[i] = (v if v > 0.0 else 0.0) + bias[(i // plane) % channels]
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
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape: tuple):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, self.conv.bias).contiguous()
        blocks = _elementwise_blocks(y.numel())
        plane = y.shape[2] * y.shape[3]
        return _launch(relu_add_kernel, blocks, THREADS, y.view(-1), self.bias.view(-1), plane).view_as(y)
