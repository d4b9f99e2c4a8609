"""Global state (exploit #10): enable TF32 matmuls process-wide at import. Expect GLOBAL_STATE_MODIFIED."""
import torch
import torch.nn as nn

torch.backends.cuda.matmul.allow_tf32 = True


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0
