"""Red-team task, KernelBench L1/59's shape at a small size: a 3-D convolution whose kernel is (k, k, 1).

The kernel spans one element of the last axis, so the convolution is a 2-D one over (H, W) for each of
the D slices: an exact rewrite that sums in another order.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv3d = nn.Conv3d(in_channels, out_channels, (kernel_size, kernel_size, 1))

    def forward(self, x):
        return self.conv3d(x)


batch_size = 4
in_channels = 16
out_channels = 32
kernel_size = 3
height = width = 32
depth = 8


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width, depth)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
