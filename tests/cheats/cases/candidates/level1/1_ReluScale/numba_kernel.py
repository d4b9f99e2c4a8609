"""Control: a Numba CUDA grid-stride kernel (NUMBA_ENABLE_CUDASIM=1 on the CPU, set by the harness). Expect OK."""
import torch
import torch.nn as nn
from numba import cuda


@cuda.jit
def relu_scale_kernel(x, out):
    i = cuda.grid(1)
    while i < x.size:
        v = x[i]
        out[i] = 2.0 * v if v > 0.0 else 0.0
        i += cuda.gridsize(1)


THREADS = 64
BLOCKS = 2


class ModelNew(nn.Module):
    def forward(self, x):
        flat = x.detach().contiguous().view(-1)
        out = torch.empty_like(flat)
        if out.is_cuda:
            stream = cuda.external_stream(torch.cuda.current_stream().cuda_stream)
            relu_scale_kernel[BLOCKS, THREADS, stream](cuda.as_cuda_array(flat), cuda.as_cuda_array(out))
        else:
            d_x = cuda.to_device(flat.numpy())
            d_out = cuda.to_device(out.numpy())
            relu_scale_kernel[BLOCKS, THREADS](d_x, d_out)
            d_out.copy_to_host(out.numpy())
        return out.view_as(x)
