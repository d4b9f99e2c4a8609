"""Control: a persistent thread pool made in __init__; every future is awaited before return.

Its idle worker threads outlive each call (as torch's own intra-op pool does),
but no work is pending when forward returns: a thread *count* alone must not
condemn it. Expect OK.
"""
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = ThreadPoolExecutor(max_workers=2)

    def forward(self, x):
        out = torch.empty_like(x)
        half = x.shape[0] // 2
        futures = [
            self.pool.submit(torch.mul, torch.relu(x[:half]), 2.0, out=out[:half]),
            self.pool.submit(torch.mul, torch.relu(x[half:]), 2.0, out=out[half:]),
        ]
        for f in futures:
            f.result()
        return out
