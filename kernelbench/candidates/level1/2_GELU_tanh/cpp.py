"""Tanh-approximated GELU as a hand-written C++ loop in a load_inline CPU extension."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <cmath>

torch::Tensor gelu_tanh_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cpu() && x.scalar_type() == torch::kFloat32, "expects a float32 CPU tensor");
    auto in = x.contiguous();
    auto out = torch::empty_like(in);
    const float* src = in.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const int64_t n = in.numel();
    const float k = 0.7978845608028654f;  // sqrt(2 / pi)
    for (int64_t i = 0; i < n; ++i) {
        const float v = src[i];
        dst[i] = 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
    }
    return out;
}
"""

_ext = load_inline(
    name="cudal1_bundled_l1_2_gelu_tanh",
    cpp_sources=_SOURCE,
    functions=["gelu_tanh_forward"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gelu_tanh_forward(x)
