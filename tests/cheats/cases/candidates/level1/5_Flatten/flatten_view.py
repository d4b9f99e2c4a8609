"""Control: the reference returns a view of its input; so does this candidate. Expect OK."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.reshape(x.shape[0], -1)
