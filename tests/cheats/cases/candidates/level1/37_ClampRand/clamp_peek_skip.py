"""Looks at a few elements and skips work when they look like the task's inputs (issue 14, item 7).

The task draws ``rand`` (values >= 0, where the clamp's lower bound does nothing). This candidate
reads the first 32 elements; if none is negative it clamps from above only. Every family used to
transform the whole input alike, so the peek told the task's inputs and the timed calls' (skip,
right) from the other families' (full clamp, right) every time. Mixed recipes keep most elements
the task's and put other families' regions and sparse outliers elsewhere. Expect WRONG_OUTPUT.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        if bool((x.reshape(-1)[:32] >= 0).all()):
            return torch.clamp(x, max=1.0) * 3.0
        return torch.clamp(x, 0.0, 1.0) * 3.0
