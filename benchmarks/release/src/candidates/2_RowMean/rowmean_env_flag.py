# expect: GLOBAL_STATE_MODIFIED
"""Correct, but sets an environment variable for the whole process at import."""
import os

import torch.nn as nn

os.environ["OMP_WAIT_POLICY"] = "ACTIVE"


class ModelNew(nn.Module):
    def forward(self, x):
        return x.mean(dim=1)
