# expect: NONDETERMINISTIC
"""Right on odd calls, 1% off on even ones (a stand-in for a race)."""
import torch
import torch.nn as nn

calls = 0


class ModelNew(nn.Module):
    def forward(self, x):
        global calls
        calls += 1
        y = x * torch.sigmoid(x)
        return y * 1.01 if calls % 2 == 0 else y
