# expect: INPUT_MUTATED
"""Correct output, then wipes the input."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = x * torch.sigmoid(x)
        x.fill_(0.0)
        return y
