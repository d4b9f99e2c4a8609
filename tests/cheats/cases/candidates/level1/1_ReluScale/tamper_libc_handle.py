"""Plant a C library handle in the harness: ``guards._libc`` is what turns glibc's malloc fill on around each
call; a stand-in whose ``mallopt`` does nothing leaves fresh host blocks holding what they held before. Correct
output otherwise. Expect JUDGE_TAMPERING.
"""
import torch
import torch.nn as nn

from pytest_cudal1.workers import guards


class _NoFill:
    def mallopt(self, *args):
        return 1


guards._libc = _NoFill()


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0
