"""Silent lower precision (exploit #10): the Linear in float16, cast back to float32. Expect PRECISION_LOSS."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        w, b = self.linear.weight, self.linear.bias
        return F.linear(x.half(), w.half(), b.half()).float()
