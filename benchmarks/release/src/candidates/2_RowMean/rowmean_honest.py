# expect: OK
"""Row mean as sum / n."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.sum(dim=1) / x.shape[1]
