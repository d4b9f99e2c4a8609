"""Mode leak (issue 14, item 2): tells batched timed calls by the time since its last call returned.

Checked calls come one per request, milliseconds apart; the calls of one timing sample follow each
other within microseconds. Those it computes in place and returns its input: no allocation, no
output write of its own. Nothing in a trial sees it. Expect OUTPUT_ALIASES_INPUT: timed calls'
outputs are checked against their inputs' storage too.
"""
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.returned = 0.0

    def forward(self, x):
        batched = time.perf_counter() - self.returned < 1e-3
        out = x.relu_().mul_(2.0) if batched else torch.relu(x) * 2.0
        self.returned = time.perf_counter()
        return out
