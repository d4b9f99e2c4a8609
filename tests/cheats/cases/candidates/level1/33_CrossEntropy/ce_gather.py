"""Honest control (issue 14, item 8): cross entropy by gathering the labelled log-probabilities.

Relies on every label lying in [0, num_classes), which ``get_inputs`` guarantees (out-of-range
labels would raise). Expect OK.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, predictions, targets):
        logp = torch.log_softmax(predictions, dim=1)
        return -logp.gather(1, targets[:, None]).mean()
