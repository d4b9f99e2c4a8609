"""Cheat on the CUDA-graph timer: honest when called eagerly, but while its calls are being captured it
returns a copy of the last eager result, so the replayed graph does almost no work.

Only short kernels are timed as graph replays (GPU only). The harness checks the first timed replay
of each capture: its outputs hold stale values, so the candidate is timed with eager calls instead, where
it is honest, and the method says why. Expect OK, at its eager speed.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.last = None

    def forward(self, x):
        if torch.cuda.is_current_stream_capturing() and self.last is not None:
            return self.last.clone()
        self.last = torch.relu(x) * 2.0
        return self.last
