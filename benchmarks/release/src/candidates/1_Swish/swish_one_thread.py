# expect: GLOBAL_STATE_MODIFIED
"""Correct, but pins torch to one intra-op thread for the whole process."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        torch.set_num_threads(1)
        return x * torch.sigmoid(x)
