"""Integer-input cache (issue 14, item 4): the sort permutation, cached under a cheap key of the labels.

The key (their sum) differs between trials, whose labels are drawn afresh, and never changed
between timed calls that refilled only the float inputs: every timed call skipped its sort and
was still right. Expect WRONG_OUTPUT: timed calls' labels are shuffled too, so the cached order is stale.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.orders = {}

    def forward(self, x, labels):
        key = int(labels.sum())
        order = self.orders.get(key)
        if order is None:
            order = self.orders[key] = torch.argsort(labels, stable=True)
        return x[order]
