"""A kernel that is right only some of the time (exploit #20, a stand-in for a race).

Counts calls in a module global: even calls are exact, odd calls are 1% off. The harness makes one
unchecked warm-up call, then runs the first trial's inputs twice (calls 2 and 3). Expect NONDETERMINISTIC.
"""
import torch
import torch.nn as nn

_calls = 0


class ModelNew(nn.Module):
    def forward(self, x):
        global _calls
        _calls += 1
        out = torch.relu(x) * 2.0
        if _calls % 2 == 1:
            out = out * (1.0 + 1e-2)
        return out
