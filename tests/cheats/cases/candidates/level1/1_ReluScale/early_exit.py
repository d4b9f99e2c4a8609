"""Early exit (exploit #21): leave the worker with status 0 in the middle of a call. Expect EARLY_EXIT."""
import os

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        os._exit(0)
