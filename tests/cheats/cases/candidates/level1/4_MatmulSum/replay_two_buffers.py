"""Output reuse (issue 14, item 5): two output buffers, alternated, each rewritten with the right sum.

Call n+2 overwrites what call n returned. A check against the previous call's output alone
never sees it (each call's buffer differs from the last one's). Expect OUTPUT_REPLAY.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.buffers = None

    def forward(self, A, B):
        if self.buffers is None:
            self.buffers = [torch.empty((), dtype=A.dtype, device=A.device) for _ in range(2)]
        out = self.buffers[self.calls % len(self.buffers)]
        self.calls += 1
        return torch.sum(torch.matmul(A, B), dim=(0, 1), out=out)
