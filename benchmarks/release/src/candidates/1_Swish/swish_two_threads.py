# expect: OK
"""Swish split over two threads that are joined before returning."""
import threading

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        mid = x.shape[0] // 2

        def part(lo, hi):
            torch.mul(x[lo:hi], torch.sigmoid(x[lo:hi]), out=out[lo:hi])

        workers = [threading.Thread(target=part, args=(0, mid)), threading.Thread(target=part, args=(mid, x.shape[0]))]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        return out
