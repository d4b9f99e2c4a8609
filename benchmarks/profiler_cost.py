"""What the kernel listing costs, and what loading CUPTI does to later launches (CUDA only).

Times ``import torch``, the CUDA context, three torch-profiler sessions in one process (the first
loads CUPTI), and the host cost of a small eager launch and of a 50-kernel CUDA-graph replay before
and after profiling. The judge lists a candidate's kernels with one profiled call after timing
(``--cudal1-no-kernel-list`` skips it); this says why not earlier: a process that loaded CUPTI
launches slower, and only the candidate's worker would have. Prints one JSON object.

    python3 benchmarks/profiler_cost.py > profiler-cost.json
"""
import json
import time

STARTED = time.perf_counter()
import torch  # noqa: E402 - timed

TORCH_IMPORTED = time.perf_counter()


def launch_us(n: int = 2000) -> float:
    """Host microseconds per small eager launch (an in-place add on one element), synchronised at the end."""
    y = torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        y.add_(1)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / n * 1e6


def graph_replay_us(n: int = 200) -> float:
    """Microseconds per replay of a captured graph of 50 small kernels."""
    graph, y = torch.cuda.CUDAGraph(), torch.zeros(1024, device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        for _ in range(3):
            y.add_(1)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        for _ in range(50):
            y.add_(1)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        graph.replay()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    x = torch.randn(256, 256, device="cuda")
    torch.cuda.synchronize()
    cuda_ready = time.perf_counter()
    from torch.profiler import ProfilerActivity, profile

    out = {"import_torch_s": TORCH_IMPORTED - STARTED, "cuda_init_s": cuda_ready - TORCH_IMPORTED,
           "launch_us_before": [launch_us() for _ in range(3)], "graph_us_before": [graph_replay_us() for _ in range(3)]}
    for k in range(3):
        start = time.perf_counter()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            (x @ x).sum()
            torch.cuda.synchronize()
        ended = time.perf_counter()
        out["kernels"] = sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})
        out[f"profile_{k}_session_s"], out[f"profile_{k}_events_s"] = ended - start, time.perf_counter() - ended
    out["launch_us_after"] = [launch_us() for _ in range(3)]
    out["graph_us_after"] = [graph_replay_us() for _ in range(3)]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
