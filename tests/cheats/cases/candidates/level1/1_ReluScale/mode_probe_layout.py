"""Mode probe (issue 14, item 2): tells calls apart by how their input tensor is laid out.

It remembers the first call's input (a trial's, always): its storage offset, the bytes its storage
holds beyond its own, whether it is a view, its version counter. Any later call whose input differs
in one of them gets a wrong answer, so a harness whose timed inputs are laid out otherwise than its
checked ones fails it. Expect OK: every call's input looks the same.
"""
import torch
import torch.nn as nn


def _layout(x):
    extra = x.untyped_storage().nbytes() - x.numel() * x.element_size()
    return (x.storage_offset(), extra, x._is_view(), x._version, x.stride(), x.is_contiguous())


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = None

    def forward(self, x):
        layout = _layout(x)
        if self.first is None:
            self.first = layout
        out = torch.relu(x) * 2.0
        return out if layout == self.first else out + 1.0
