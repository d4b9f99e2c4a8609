"""Mutate the inputs (exploit #8): a correct, fresh output, then the input is zeroed.

(Against a harness that computes the reference after the candidate on the same
tensors, zeroing the input makes a zero output "correct".) Expect INPUT_MUTATED.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.relu(x) * 2.0
        x.zero_()
        return out
