"""GPU probe (session 18): where a capture-in-forward candidate (CUDA-L1 L2/73, release line 173) leaves torch's
allocator with a capture 'underway', and whether ending the failed capture's pool routing clears it."""
import json, subprocess, sys, traceback

import torch


def stale():
    """Does the allocator think a capture is underway? (empty_cache raises then, catchably, in Python)"""
    try:
        torch.cuda.empty_cache()
        return False
    except RuntimeError as e:
        return str(e).splitlines()[0][:160]


def e_basic():
    r = {}
    pool = torch.cuda.MemPool()
    try:
        with torch.cuda.use_mem_pool(pool):
            torch.cuda.empty_cache()
        r["empty_cache_in_use_mem_pool"] = "ok"
    except Exception as e:
        r["empty_cache_in_use_mem_pool"] = repr(e)[:200]
    r["after"] = stale()
    x = torch.randn(1000, device="cuda")
    try:
        with torch.cuda.use_mem_pool(pool):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x * 2
            g.replay()
        r["graph_in_use_mem_pool"] = "ok"
    except Exception as e:
        r["graph_in_use_mem_pool"] = repr(e)[:200]
    r["after2"] = stale()
    return r


def e_failed_capture(fix):
    from pytest_cudal1.workers import runtime
    if fix == "installed":
        runtime.close_failed_captures()
    r = {}
    x = torch.randn(1000, device="cuda")
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            y = x * 2
            y.sum().item()
    except Exception as e:
        r["capture"] = repr(e)[:200]
    r["stale"] = stale()
    print("capture done", r, flush=True)
    if fix:
        dev = torch.cuda.current_device()
        if fix in ("end", "end_release"):
            try:
                torch._C._cuda_endAllocateToPool(dev, g.pool()); r["end"] = "ok"
            except Exception as e:
                r["end"] = repr(e)[:200]
            print("end", r, flush=True)
        if fix == "end_release":
            try:
                torch._C._cuda_releasePool(dev, g.pool()); r["release"] = "ok"
            except Exception as e:
                r["release"] = repr(e)[:200]
            print("release", r, flush=True)
        r["stale_after_fix"] = stale()
        print("stale", r, flush=True)
        g.reset()
        print("reset", flush=True)
        p = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(p):
            z = torch.randn(1 << 20, device="cuda")
        del z
        print("alloc in pool", flush=True)
        del p
        print("mempool teardown ok", flush=True)
        del g
        print("graph deleted", flush=True)
    return r


def e_harness(steps):
    """The candidate worker's path with line 173's model (its except prints what it caught)."""
    from pytest_cudal1.workers import guards, runtime
    from pytest_cudal1.workers.timing_inputs import TimingInputs
    runtime.float32_numerics()
    runtime.steady_allocator()
    if "fixed" in steps:
        runtime.close_failed_captures()
    rec = [json.loads(l) for l in open(".device/release_all.jsonl") if json.loads(l)["name"] == "line173"][0]
    code = rec["custom_code"].replace("                except Exception:\n",
                                      "                except Exception:\n                    import traceback; traceback.print_exc(file=sys.stdout); print('caught above in forward', flush=True)\n")
    ns = {"sys": sys}
    exec(compile("import sys\n" + code, "line173", "exec"), ns)
    torch.manual_seed(0)
    model = ns["ModelNew"](*ns["get_init_inputs"]()).cuda().eval()
    call = lambda args: model(*args)
    r = {}
    def step(name, fn):
        try:
            with torch.no_grad():
                out = fn()
            r[name] = "ok"
        except Exception as e:
            r[name] = repr(e)[:300]
            traceback.print_exc(file=sys.stdout)
        r[name + ":graph_path"] = model.use_cuda_graph
        r[name + ":stale"] = stale() if "probe_stale" in steps else None
        print(name, r[name], flush=True)
    inputs = [x.cuda() for x in ns["get_inputs"]()]
    poison = [4 * 128 * 16 * 30 * 30]
    def warm():
        g = guards.Guarded(runtime.to_device(inputs, "cuda"))
        guards.poison(poison, "cuda")
        out = model(*g.inputs); torch.cuda.synchronize(); return out
    step("warm_up", warm)
    def trial():
        staged = runtime.to_device(inputs, "cuda")
        runtime.hold("cuda", 1_000_000)
        g = guards.Guarded(staged); del staged
        guards.poison(poison, "cuda")
        out = model(*g.inputs); torch.cuda.synchronize(); return out
    for i in range(3):
        step(f"trial{i}", trial)
    loop = runtime.TimedLoop(lambda a: model(*a), TimingInputs(runtime.to_device(inputs, "cuda"), "cuda"), poison)
    if "capture" in steps:
        step("capture", lambda: loop.capture(4, 2))
    step("place1", lambda: loop.place(4, 2))
    def sample():
        run, _ = loop.prepare(1, 4, False); return run()
    step("sample", sample)
    step("place2", lambda: loop.place(8, 2))
    return r


if __name__ == "__main__":
    which = sys.argv[1]
    if which == "all":
        for name in ["failed_installed", "harness_fixed", "harness_capture_fixed"]:
            p = subprocess.run([sys.executable, "-u", __file__, name], capture_output=True, text=True, timeout=120)
            print(f"=== {name}: rc={p.returncode}\n{p.stdout[-6000:]}\n--- stderr head\n{p.stderr[:1500]}", flush=True)
        sys.exit(0)
    res = {"failed_end": lambda: e_failed_capture("end"), "failed_end_release": lambda: e_failed_capture("end_release"),
           "failed_installed": lambda: e_failed_capture("installed"),
           "harness_fixed": lambda: e_harness(["fixed"]), "harness_capture_fixed": lambda: e_harness(["capture", "fixed"])}[which]()
    print("RESULT", json.dumps(res, indent=1))
