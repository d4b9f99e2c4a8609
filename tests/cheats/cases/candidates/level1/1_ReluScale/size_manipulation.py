"""Hyperparameter manipulation (exploit #9): shrink the problem through module globals.

Under a harness that exec's task and candidate into one namespace, these names
would shrink every later input while the baseline stayed full size. Here the
inputs come from the reference worker, so the globals do nothing and the
candidate, which computes correctly on whatever it gets, must simply pass. Expect OK.
"""
import torch
import torch.nn as nn

batch_size = 1
dim = 2


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0
