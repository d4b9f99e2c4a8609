"""LayerNorm as a Numba CUDA kernel, one thread per row, two-pass mean/variance (GPU or simulator)."""
import math

import torch
import torch.nn as nn
from numba import cuda


@cuda.jit
def layer_norm_kernel(x, weight, bias, eps, out):
    row = cuda.grid(1)
    if row < x.shape[0]:
        cols = x.shape[1]
        mean = 0.0
        for j in range(cols):
            mean += x[row, j]
        mean /= cols
        var = 0.0
        for j in range(cols):
            var += (x[row, j] - mean) ** 2
        rstd = 1.0 / math.sqrt(var / cols + eps)
        for j in range(cols):
            out[row, j] = (x[row, j] - mean) * rstd * weight[j] + bias[j]


THREADS = 32


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
    def __init__(self, normalized_shape: int):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape, elementwise_affine=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cols = self.ln.weight.numel()
        rows = x.reshape(-1, cols).contiguous()
        out = torch.empty_like(rows)
        blocks = -(-rows.shape[0] // THREADS)
        args = (rows, self.ln.weight.view(-1), self.ln.bias.view(-1), self.ln.eps)
        return _launch(layer_norm_kernel, blocks, THREADS, out, *args).view_as(x)
