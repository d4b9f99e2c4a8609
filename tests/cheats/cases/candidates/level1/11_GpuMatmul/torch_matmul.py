"""Call the library, claim a kernel (exploit #13): only torch.matmul (cuBLAS) runs.

Under --cudal1-custom-kernels-only, expect LIBRARY_ONLY.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)
