"""bf16 arithmetic on the timed calls nobody compared in full (issue 14, item 3).

Like ``sort_unsorted_between``, but the calls other than a sample's last return the sorted values
rounded through bfloat16: errors of ~4e-3 that average out of sums checked at 1e-3. Expect
WRONG_OUTPUT (the digest's projections) or PRECISION_LOSS (the sampled elements).
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
        out = torch.sort(x, dim=-1).values
        if _not_last_of_sample(x):
            return out.bfloat16().float()
        return out
