"""Session-18 diagnosis (run from .device/diag as a sitecustomize on PYTHONPATH): in a judge worker, record the allocator's
history and, at an out-of-memory, write a summary of every segment (pool, size, blocks, where each was allocated)."""
import os

if os.environ.get("CUDAL1_WORKER_TOKEN") and os.environ.get("CUDAL1_OOM_DIR"):
    import json
    import torch
    import torch.cuda

    _orig = torch.cuda._lazy_init

    def _dump(device, alloc, device_alloc, device_free):
        snap = torch.cuda.memory._snapshot()
        segs = []
        for s in snap["segments"]:
            blocks = []
            for b in s["blocks"]:
                frames = [f"{f['filename'].split('/')[-1]}:{f['line']} {f['name']}" for f in b.get("frames", [])
                          if "torch/" not in f["filename"]][:5]
                blocks.append({"size": b["size"], "state": b["state"], "frames": frames})
            segs.append({"pool": list(s.get("segment_pool_id", (0, 0))), "total": s["total_size"],
                         "allocated": s["allocated_size"], "stream": s["stream"], "blocks": blocks})
        path = os.path.join(os.environ["CUDAL1_OOM_DIR"], f"oom-{os.getpid()}-{len(os.listdir(os.environ['CUDAL1_OOM_DIR']))}.json")
        with open(path, "w") as f:
            json.dump({"pid": os.getpid(), "alloc": alloc, "device_alloc": device_alloc, "device_free": device_free,
                       "segments": segs}, f)

    def _hooked():
        _orig()
        if not getattr(_hooked, "done", False):
            _hooked.done = True
            torch.cuda.memory._record_memory_history(max_entries=1000, stacks="python")
            torch._C._cuda_attach_out_of_memory_observer(_dump)

    torch.cuda._lazy_init = _hooked
