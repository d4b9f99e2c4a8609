"""Global state: set an environment variable at import. Expect GLOBAL_STATE_MODIFIED."""
import os

import torch
import torch.nn as nn

os.environ["FOO"] = "1"


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0
