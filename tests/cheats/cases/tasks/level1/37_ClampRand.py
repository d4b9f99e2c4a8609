"""Red-team task: clamp of uniform [0, 1) inputs to [0, 1] (a no-op on the task's own distribution).

``rand`` promises nothing the task keeps afterwards: other families put negative and large values
here, so a kernel may not skip the clamp.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.clamp(x, 0.0, 1.0) * 3.0


def get_inputs():
    return [torch.rand(64, 512)]


def get_init_inputs():
    return []
