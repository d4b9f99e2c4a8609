"""Global state: change torch's intra-op thread count from inside forward. Expect GLOBAL_STATE_MODIFIED."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        torch.set_num_threads(1)
        return torch.relu(x) * 2.0
