"""Silent lower precision (exploit #10): the reduction in bfloat16, cast back to float32. Expect PRECISION_LOSS."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.bfloat16().sum(dim=-1).float()
