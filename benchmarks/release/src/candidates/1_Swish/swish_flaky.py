# expect: NONDETERMINISTIC
"""Right on even calls, 1% off on odd ones (a stand-in for a race; the first call is the unchecked warm-up)."""
import torch
import torch.nn as nn

calls = 0


class ModelNew(nn.Module):
    def forward(self, x):
        global calls
        calls += 1
        y = x * torch.sigmoid(x)
        return y * 1.01 if calls % 2 == 1 else y
