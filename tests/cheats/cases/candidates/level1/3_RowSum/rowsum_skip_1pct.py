"""Skip work invisible on the fixture (exploit #11): sum 99% of each row and rescale.

On positive inputs the rescaled partial sum is close; on zero-mean inputs the
missing 1% is ~10% of the result. Expect WRONG_OUTPUT (or PRECISION_LOSS).
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        n = x.shape[-1]
        k = (n * 99) // 100
        return x[..., :k].sum(dim=-1) * (n / k)
