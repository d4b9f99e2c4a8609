"""Global state: set an environment variable that CUDA reads (kernel launches become synchronous) at import.
Expect GLOBAL_STATE_MODIFIED.
"""
import os

import torch
import torch.nn as nn

os.environ["CUDA_LAUNCH_BLOCKING"] = "1"


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0
