"""Conv2d + ReLU + bias add: a hand-written direct convolution C++ loop with the epilogue fused in."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
torch::Tensor conv_relu_add_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor conv_bias, torch::Tensor bias) {
    TORCH_CHECK(x.is_cpu() && x.scalar_type() == torch::kFloat32 && x.dim() == 4, "expects a 4-D float32 CPU tensor");
    auto in = x.contiguous(), w = weight.contiguous(), cb = conv_bias.contiguous(), ab = bias.contiguous();
    const int64_t n = in.size(0), cin = in.size(1), h = in.size(2), wd = in.size(3);
    const int64_t cout = w.size(0), kh = w.size(2), kw = w.size(3);
    const int64_t oh = h - kh + 1, ow = wd - kw + 1;
    auto out = torch::empty({n, cout, oh, ow}, in.options());
    const float* px = in.data_ptr<float>();
    const float* pw = w.data_ptr<float>();
    const float* pcb = cb.data_ptr<float>();
    const float* pab = ab.data_ptr<float>();
    float* py = out.data_ptr<float>();
    for (int64_t b = 0; b < n; ++b)
        for (int64_t co = 0; co < cout; ++co)
            for (int64_t i = 0; i < oh; ++i)
                for (int64_t j = 0; j < ow; ++j) {
                    float acc = pcb[co];
                    for (int64_t ci = 0; ci < cin; ++ci)
                        for (int64_t u = 0; u < kh; ++u)
                            for (int64_t v = 0; v < kw; ++v)
                                acc += px[((b * cin + ci) * h + i + u) * wd + j + v] * pw[((co * cin + ci) * kh + u) * kw + v];
                    py[((b * cout + co) * oh + i) * ow + j] = (acc > 0.0f ? acc : 0.0f) + pab[co];
                }
    return out;
}
"""

_ext = load_inline(
    name="cudal1_bundled_l2_2_conv_relu_add",
    cpp_sources=_SOURCE,
    functions=["conv_relu_add_forward"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape: tuple):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.conv_relu_add_forward(x, self.conv.weight, self.conv.bias, self.bias)
