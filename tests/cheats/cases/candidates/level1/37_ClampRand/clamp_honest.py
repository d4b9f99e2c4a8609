"""Honest control: the clamp, always. Expect OK."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp(x, 0.0, 1.0) * 3.0
