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
    """True inside a timed sample of several calls (eager ``batches``, or the ``sets`` of a graph
    capture), except for its last call."""
    f = sys._getframe(1)
    while f is not None:
        for name in ("batches", "sets"):
            calls = f.f_locals.get(name)
            if isinstance(calls, list) and len(calls) > 1 and isinstance(calls[-1], list):
                return calls[-1][0] is not x
        f = f.f_back
    return False


class ModelNew(nn.Module):
    def forward(self, x):
        if _not_last_of_sample(x):
            return x.clone()
        return torch.sort(x, dim=-1).values
