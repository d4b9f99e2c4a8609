# expect: EARLY_EXIT
"""Exits the process with status 0 mid-call."""
import os

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        os._exit(0)
