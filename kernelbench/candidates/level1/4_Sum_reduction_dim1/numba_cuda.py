"""Sum over the reduced dimension (moved last) as a Numba CUDA kernel, one thread per row (GPU or simulator)."""
import torch
import torch.nn as nn
from numba import cuda


@cuda.jit
def row_sum_kernel(x, out):
    row = cuda.grid(1)
    if row < x.shape[0]:
        total = 0.0
        for j in range(x.shape[1]):
            total += x[row, j]
        out[row] = total


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
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        moved = x.movedim(self.dim, -1)
        rows = moved.reshape(-1, moved.shape[-1]).contiguous()
        out = torch.empty(rows.shape[0], dtype=x.dtype, device=x.device)
        return _launch(row_sum_kernel, -(-rows.shape[0] // THREADS), THREADS, out, rows).reshape(moved.shape[:-1])
