"""Honest control: torch.sort. Expect OK."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.sort(x, dim=-1).values
