"""LayerNorm over (64, 256, 256) in plain PyTorch, restructured for few, huge rows.

F.layer_norm gives each of the 16 rows (4M elements) to one block, leaving most SMs idle.
Here torch.var_mean (a split, grid-wide Welford reduction) computes the statistics, then two
fused elementwise passes apply them: t = x*rstd - mean*rstd (one addcmul), y = t*w + b (one
in-place addcmul). Same parameters as nn.LayerNorm. (x*rstd - mean*rstd loses ~|mean|/std ulps
versus (x - mean)*rstd; negligible unless the mean is ~1000x the standard deviation.)
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)  # same parameters as the reference

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w, b = self.ln.weight, self.ln.bias
        dims = tuple(range(x.dim() - w.dim(), x.dim()))
        var, mean = torch.var_mean(x, dim=dims, keepdim=True, correction=0)
        rstd = torch.rsqrt(var + self.ln.eps)
        t = torch.addcmul(-mean * rstd, x, rstd)
        return torch.addcmul(b, t, w, out=t)
