"""Global state: turn on cuDNN autotuning process-wide at import. Expect GLOBAL_STATE_MODIFIED."""
import torch
import torch.nn as nn

torch.backends.cudnn.benchmark = True


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0
