"""Return the input itself, computed in place (exploit #4): no allocation, output aliases the input.

The reference returns fresh storage. Expect OUTPUT_ALIASES_INPUT.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        x.relu_().mul_(2.0)
        return x
