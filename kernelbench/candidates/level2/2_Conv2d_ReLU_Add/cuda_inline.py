"""Conv2d + ReLU + bias add as one direct-convolution CUDA kernel (thread per output, epilogue fused), load_inline sm_90."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor conv_relu_add_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor conv_bias, torch::Tensor bias);"

_CUDA = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

__global__ void conv_relu_add_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ cb,
                                     const float* __restrict__ bias, float* __restrict__ out, int64_t total,
                                     int cin, int h, int wd, int cout, int kh, int kw, int oh, int ow) {
    const int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (idx >= total) return;
    const int j = idx % ow;
    const int i = (idx / ow) % oh;
    const int co = (idx / ((int64_t)ow * oh)) % cout;
    const int64_t b = idx / ((int64_t)ow * oh * cout);
    float acc = cb[co];
    for (int ci = 0; ci < cin; ++ci) {
        const float* xp = x + ((b * cin + ci) * h + i) * wd + j;
        const float* wp = w + ((int64_t)co * cin + ci) * kh * kw;
        for (int u = 0; u < kh; ++u)
            for (int v = 0; v < kw; ++v) acc = fmaf(xp[u * wd + v], wp[u * kw + v], acc);
    }
    out[idx] = fmaxf(acc, 0.0f) + bias[co];
}

torch::Tensor conv_relu_add_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor conv_bias, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 4, "expects a 4-D float32 CUDA tensor");
    auto in = x.contiguous(), w = weight.contiguous(), cb = conv_bias.contiguous(), ab = bias.contiguous();
    const int n = (int)in.size(0), cin = (int)in.size(1), h = (int)in.size(2), wd = (int)in.size(3);
    const int cout = (int)w.size(0), kh = (int)w.size(2), kw = (int)w.size(3);
    const int oh = h - kh + 1, ow = wd - kw + 1;
    auto out = torch::empty({n, cout, oh, ow}, in.options());
    const int64_t total = out.numel();
    const int threads = 256;
    const int blocks = (int)((total + threads - 1) / threads);
    conv_relu_add_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        in.data_ptr<float>(), w.data_ptr<float>(), cb.data_ptr<float>(), ab.data_ptr<float>(), out.data_ptr<float>(),
        total, cin, h, wd, cout, kh, kw, oh, ow);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_ext = load_inline(
    name="cudal1_bundled_l2_2_conv_relu_add_cuda",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["conv_relu_add_forward"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape: tuple):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.conv_relu_add_forward(x, self.conv.weight, self.conv.bias, self.bias)
