"""Sum over the reduced dimension (moved last) as a Triton kernel with one program per row."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        moved = x.movedim(self.dim, -1)
        cols = moved.shape[-1]
        rows = moved.reshape(-1, cols).contiguous()
        out = torch.empty(rows.shape[0], dtype=x.dtype, device=x.device)
        row_sum_kernel[(rows.shape[0],)](rows, out, cols, BLOCK=triton.next_power_of_2(cols))
        return out.reshape(moved.shape[:-1])
