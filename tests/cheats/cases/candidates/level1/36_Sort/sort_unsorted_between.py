"""Cheap wrong answers on the timed calls nobody compared in full (issue 14, item 3).

In a multi-call timed sample only the last call's output used to be compared in full; the others
had an order-insensitive digest (numel, sum, sum|x|, sum x^2). This candidate finds the sample's
call list on the stack and, on every call but the last, returns its input unsorted: same sums,
wrong order, no work. Honest on trials and on the last call. Expect WRONG_OUTPUT.
"""
import sys

import torch
import torch.nn as nn


def _not_last_of_sample(x):
    f = sys._getframe(1)
    while f is not None:
        batches = f.f_locals.get("batches")
        if isinstance(batches, list) and len(batches) > 1 and isinstance(batches[-1], list):
            return batches[-1][0] is not x
        f = f.f_back
    return False


class ModelNew(nn.Module):
    def forward(self, x):
        if _not_last_of_sample(x):
            return x.clone()
        return torch.sort(x, dim=-1).values
