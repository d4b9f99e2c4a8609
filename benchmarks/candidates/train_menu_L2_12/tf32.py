"""A global-state cheat: turns on TF32 for every matmul in the process (a numeric setting)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        torch.backends.cuda.matmul.allow_tf32 = True
        return F.leaky_relu(self.gemm(x) * self.multiplier, self.negative_slope)
