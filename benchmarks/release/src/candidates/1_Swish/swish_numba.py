# expect: OK
"""Swish as a Numba CUDA grid-stride kernel (simulated on the CPU)."""
import math

import torch
import torch.nn as nn
from numba import cuda


@cuda.jit
def swish_kernel(x, out):
    i = cuda.grid(1)
    while i < x.size:
        v = x[i]
        out[i] = v / (1.0 + math.exp(-v))
        i += cuda.gridsize(1)


class ModelNew(nn.Module):
    def forward(self, x):
        flat = x.detach().contiguous().view(-1)
        out = torch.empty_like(flat)
        if out.is_cuda:
            stream = cuda.external_stream(torch.cuda.current_stream().cuda_stream)
            swish_kernel[2, 64, stream](cuda.as_cuda_array(flat), cuda.as_cuda_array(out))
        else:
            d_out = cuda.to_device(out.numpy())
            swish_kernel[2, 64](cuda.to_device(flat.numpy()), d_out)
            d_out.copy_to_host(out.numpy())
        return out.view_as(x)
