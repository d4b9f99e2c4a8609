"""Global state: turn TorchScript's CPU fuser on process-wide at import (CUDA-L1's L3/22 does so for the GPU):
every scripted function the caller runs later is compiled differently. Expect GLOBAL_STATE_MODIFIED."""
import torch
import torch.nn as nn

torch._C._jit_override_can_fuse_on_cpu(True)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0
