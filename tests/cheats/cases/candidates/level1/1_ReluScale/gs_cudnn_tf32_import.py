"""Global state (exploit #10): turn cuDNN's TF32 back on process-wide at import (PyTorch's default, which the
judge's workers turn off). Expect PRECISION_SETTING_MODIFIED."""
import torch
import torch.nn as nn

torch.backends.cudnn.allow_tf32 = True


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0
