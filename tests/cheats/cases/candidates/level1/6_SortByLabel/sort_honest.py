"""Control: sorts on every call, and checks that the labels keep the task's range (0 <= label < 8),
as a kernel indexing a per-class table would need. Expect OK: timed refills permute the labels,
never leave their range."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, labels):
        if int(labels.min()) < 0 or int(labels.max()) >= 8:
            raise ValueError(f"label out of range: [{int(labels.min())}, {int(labels.max())}]")
        return x[torch.argsort(labels, stable=True)]
