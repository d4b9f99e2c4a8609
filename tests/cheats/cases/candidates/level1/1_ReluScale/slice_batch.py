"""Shrink the work: compute on the first row only. Expect SHAPE_MISMATCH."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x[:1]) * 2.0
