"""Control: a scratch buffer kept across calls, but a fresh output tensor every call. Expect OK."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scratch = None

    def forward(self, x):
        if self.scratch is None or self.scratch.shape != x.shape or self.scratch.device != x.device:
            self.scratch = torch.empty_like(x)
        torch.clamp(x, min=0.0, out=self.scratch)  # intermediate lives in the reused buffer
        return self.scratch * 2.0  # the output itself is new storage on every call
