"""LayerNorm (two-pass mean/variance, affine) as a hand-written C++ row loop in a load_inline CPU extension."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <cmath>

torch::Tensor layer_norm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cpu() && x.scalar_type() == torch::kFloat32, "expects a float32 CPU tensor");
    auto in = x.contiguous();
    const int64_t cols = weight.numel();
    const int64_t rows = in.numel() / cols;
    auto out = torch::empty_like(in);
    auto wc = weight.contiguous(), bc = bias.contiguous();
    const float* w = wc.data_ptr<float>();
    const float* b = bc.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        const float* src = in.data_ptr<float>() + r * cols;
        float* dst = out.data_ptr<float>() + r * cols;
        double mean = 0.0, var = 0.0;
        for (int64_t c = 0; c < cols; ++c) mean += src[c];
        mean /= cols;
        for (int64_t c = 0; c < cols; ++c) var += (src[c] - mean) * (src[c] - mean);
        const double rstd = 1.0 / std::sqrt(var / cols + eps);
        for (int64_t c = 0; c < cols; ++c) {
            dst[c] = static_cast<float>((src[c] - mean) * rstd) * w[c] + b[c];
        }
    }
    return out;
}
"""

_ext = load_inline(
    name="cudal1_bundled_l1_6_layer_norm",
    cpp_sources=_SOURCE,
    functions=["layer_norm_forward"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: int):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape, elementwise_affine=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.layer_norm_forward(x, self.ln.weight, self.ln.bias, self.ln.eps)
