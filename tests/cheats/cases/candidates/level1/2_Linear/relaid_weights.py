"""Control: weights re-laid-out once in __init__ (transposed, contiguous), then one addmm per call. Expect OK.

Built under the harness's seed, nn.Linear draws the same parameters as the reference's.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        lin = nn.Linear(in_features, out_features)
        self.register_buffer("weight_t", lin.weight.detach().t().contiguous())
        self.register_buffer("bias", lin.bias.detach().clone())

    def forward(self, x):
        return torch.addmm(self.bias, x, self.weight_t)
