#!/usr/bin/env bash
# The GPU runs behind benchmarks/results/, in phases that fit one device call each:
#   bash benchmarks/gpu_session.sh PHASE [PHASE ...]
# PHASE: tests (GPU-marked tests; TESTS_PATHS narrows them to some files), suite (the whole red-team suite, CPU cases on CUDA too), bundled (the
# bundled set), kernelbench (level-1 candidates), kbrefs (the level-1 references judged as candidates),
# cheats (the red-team release), rewrites (the built-in policy's torch.compile and CUDA-graph rewrites of the
# tasks in .device/kb_rewrites.jsonl, judged with both speed measures), timing (benchmarks/timing_quality.py), probe
# (benchmarks/precision_probe.py), calloverhead (benchmarks/call_overhead.py: the eager path's per-call overhead
# beside a bare eager call, CUDA events too), checkcosts (benchmarks/check_costs.py: a timed sample's checks per
# call), forged (benchmarks/forged_timer.py: relu tasks judged against themselves and against timers forged past a
# disarmed tamper watch; FORGED_ARGS its options). Settings: KB_SELECT, a pytest -k expression, picks KernelBench items;
# KB_BUDGET, the references' timing budget in seconds (1.5); KB_ARGS, more options for both (e.g.
# --cudal1-timing-processes=3); SUITE_K the red-team tests; TQ_ONLY the
# timing sections; TQ_ARGS more timing_quality.py options (e.g. --graphs-only --kernels matmul_eager);
# PROBE_ARGS the probe's arguments (e.g. --variants realloc,refill_tail).
# REWRITE_STEPS the rewrites phase's steps (e.g. compile_default,cuda_graph; default: all).
# release: CUDA-L1's A100 release (.device/a100.jsonl, copied from ../shared/cudal1) re-judged, RELEASE_SELECT a -k
# expression (e.g. "L1" for level 1), RELEASE_FILE a part of it (records with "name": "line<N>", N their line in
# a100.jsonl, so parts judged in several calls keep one naming), RELEASE_SKIP ledgers whose records are left out
# (RELEASE_FILE=.device/release_all.jsonl RELEASE_SKIP="$(echo benchmarks/results/*/*a100-ledger*.jsonl)": those no
# committed ledger has judged),
# RELEASE_TIMEOUT seconds before it is interrupted (the judged records kept), RELEASE_ARGS more options; appends to
# a100-ledger.jsonl.
# optimize: `pytest --cudal1-optimize` with the built-in policy over .device/kb_optimize.jsonl (made by
# benchmarks/select_tasks.py from benchmarks/gpu_optimize_tasks.txt), OPT_SELECT a -k expression (e.g. "L1", one
# level a call), OPT_ARGS more options (e.g. --cudal1-import=LEDGER,LEDGER,.device/a100.jsonl of the re-judged
# release, the release itself being where the ledgers' code is found;
# --cudal1-policy=builtin?steps=compile_default,cuda_graph for the two baselines and their combination without
# max-autotune's minutes-long compiles; --cudal1-task-budget=0, since one judgment takes 22-50 s on an H100 and the
# default 30 s stopped 7 of 8 tasks after their first candidate, session 25), OPT_TIMEOUT seconds before it is
# interrupted (what was judged kept, the final table printed; 0: no limit); ledger, exemplar database, output
# folder and report.
# train: benchmarks/train_smoke.py (a tiny model trained on the judge's GPU rewards for KernelBench L2/12, read
# from .device/kb_rewrites.jsonl; TRAIN_STEPS, default 30); needs trl, datasets, dill and multiprocess wheels in .whl/.
# throughput (benchmarks/throughput.py: one batch judged by ours, KernelBench's and CUDA-L1's harnesses; needs
# .device/a100.jsonl and .device/anchors/) with TP_HARNESSES (default ours,kernelbench,cudal1) and TP_ARGS
# (split on spaces: e.g. "--records 6 --rollouts 2 --ours-args=--cudal1-trials=3"); results in throughput/; TP_ARGS2 runs
# it again with those arguments, results in throughput-2/ (and TP_ARGS3 in throughput-3/).
# Results are packed into $OUT every 20 s and after every phase, so a call cut short still returns them;
# nvidia-smi-trace.csv beside them has the card's clocks, power and temperatures every 200 ms.
# Needs: .device/kb_l1.jsonl (the chosen KernelBench tasks, copied from ../shared, never committed) and, for
# Numba, a numpy wheel the image's numba accepts in .whl/; benchmarks/make_device_dir.sh rebuilds both folders.
# Writes everything under $OUT.
set -u
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
stage=$(mktemp -d)/gpu
mkdir -p "$stage"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >"$stage/install.log" 2>&1 \
    || export PYTEST_ADDOPTS="-p pytest_cudal1.plugin" PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv >"$stage/nvidia-smi.csv"
# The card's clocks, power and temperatures every 200 ms, to tell a device-wide step in timed samples from noise.
trace=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,temperature.memory,clocks_event_reasons.active
nvidia-smi --format=csv -lms 200 --query-gpu="$trace" >"$stage/nvidia-smi-trace.csv" 2>/dev/null &
tracer=$!
common=(-p no:cacheprovider -q --cudal1-cache-dir=/tmp/cudal1-cache)
throughput_run() {  # DIR ARGS...: benchmarks/throughput.py into $stage/DIR, its log $stage/DIR.log
    python3 benchmarks/throughput.py --release .device/a100.jsonl --anchors .device/anchors --out "$stage/$1" \
        --harnesses "${TP_HARNESSES:-ours,kernelbench,cudal1}" "${@:2}" >>"$stage/$1.log" 2>&1
}
pack() { tar -C "$(dirname "$stage")" -czf "$OUT/gpu-results.tmp.tar.gz" gpu && mv "$OUT/gpu-results.tmp.tar.gz" "$OUT/gpu-results.tar.gz"; }
( while sleep 20; do pack; done ) &
packer=$!

for phase in "$@"; do
    start=$(date +%s)
    case "$phase" in
        tests)  # each test's outcome (a failure's report too) is written as it ends: a cut call keeps them
            CUDAL1_TEST_REPORT="$stage/tests-gpu-report.txt" PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD/benchmarks" \
                python3 -m pytest ${TESTS_PATHS:-tests} -m gpu -q -p no:cacheprovider -p report_as_it_runs -rs \
                >"$stage/tests-gpu.log" 2>&1 ;;
        suite)
            python3 -m pytest tests/cheats tests/test_plugin_collection.py -q -p no:cacheprovider -rs \
                -k "${SUITE_K:-not nothing}" >>"$stage/tests-suite.log" 2>&1 ;;
        probe)
            python3 benchmarks/precision_probe.py --out "$stage/precision-probe.json" ${PROBE_ARGS:-} >"$stage/precision-probe.log" 2>&1 ;;
        bundled)
            python3 -m pytest --cudal1 "${common[@]}" --cudal1-ledger="$stage/bundled-ledger.jsonl" \
                --cudal1-html="$stage/bundled-report.html" --benchmark-json="$stage/bundled-benchmark.json" \
                >"$stage/bundled.log" 2>&1 ;;
        kernelbench)
            python3 -m pytest "${common[@]}" --cudal1-tasks=.device/kb_l1.jsonl -k "${KB_SELECT:-not torch_fast}" \
                --cudal1-candidates=benchmarks/candidates/kernelbench_l1 --cudal1-trials=3 --cudal1-time-budget=1.5 \
                ${KB_ARGS:-} --cudal1-ledger="$stage/kernelbench-ledger.jsonl" >>"$stage/kernelbench.log" 2>&1 ;;
        forged)
            python3 benchmarks/forged_timer.py --out "$stage/forged" ${FORGED_ARGS:-} >"$stage/forged.log" 2>&1 ;;
        kbrefs)
            python3 -m pytest "${common[@]}" --cudal1-tasks=.device/kb_l1.jsonl -k "${KB_SELECT:-L1}" \
                --cudal1-trials=3 --cudal1-time-budget="${KB_BUDGET:-1.5}" ${KB_ARGS:-} \
                --cudal1-ledger="$stage/kernelbench-ledger.jsonl" >"$stage/kbrefs.log" 2>&1 ;;
        rewrites)
            python3 benchmarks/write_rewrites.py .device/kb_rewrites.jsonl "$stage/rewrites" --steps "${REWRITE_STEPS:-}" \
                >"$stage/rewrites.log" 2>&1
            python3 -m pytest "${common[@]}" --cudal1-tasks=.device/kb_rewrites.jsonl --cudal1-candidates="$stage/rewrites" \
                --cudal1-trials=3 --cudal1-time-budget="${KB_BUDGET:-2}" ${KB_ARGS:-} -rA \
                --cudal1-ledger="$stage/rewrites-ledger.jsonl" --cudal1-html="$stage/rewrites-report.html" \
                >>"$stage/rewrites.log" 2>&1 ;;
        release)
            release="${RELEASE_FILE:-.device/a100.jsonl}"
            if [ -n "${RELEASE_SKIP:-}" ]; then  # leave out the records these ledgers already judged
                python3 - "$release" "$stage/release-todo.jsonl" $RELEASE_SKIP <<'PY'
import json, sys
done = {json.loads(line)["candidate_name"] for path in sys.argv[3:] for line in open(path) if line.strip()}
with open(sys.argv[1]) as src, open(sys.argv[2], "w") as dst:
    dst.writelines(line for line in src if json.loads(line).get("name") not in done)
PY
                release="$stage/release-todo.jsonl"
            fi
            # RELEASE_TIMEOUT: Ctrl-C after that many seconds; the records judged so far are kept (0: no limit).
            timeout -s INT "${RELEASE_TIMEOUT:-0}" \
            python3 -m pytest "${common[@]}" --cudal1-candidates="$release" -k "${RELEASE_SELECT:-L}" \
                --cudal1-time-budget="${KB_BUDGET:-2}" ${RELEASE_ARGS:-} --cudal1-ledger="$stage/a100-ledger.jsonl" \
                --cudal1-html="$stage/a100-report.html" -rA >>"$stage/release.log" 2>&1
            # When each build's files were written (a .so newer than its ok.json was built again by the worker).
            find /tmp/cudal1-cache/builds \( -name ok.json -o -name "*.so" -o -name build.ninja \) \
                -printf '%T@ %p\n' 2>/dev/null | sort -k2 >"$stage/release-build-files.txt"
            # Which outputs ninja built, when and with which command hash (two lines for one output: built twice).
            for log in /tmp/cudal1-cache/builds/*/torch_extensions/*/.ninja_log; do
                [ -f "$log" ] && { echo "== $log"; cat "$log"; }
            done >"$stage/release-ninja-logs.txt" 2>/dev/null
            tar -C /tmp/cudal1-cache -czf "$stage/release-worker-logs.tar.gz" logs 2>/dev/null ;;
        optimize)
            timeout -s INT "${OPT_TIMEOUT:-0}" python3 -m pytest "${common[@]}" --cudal1-optimize --cudal1-tasks=.device/kb_optimize.jsonl \
                -k "${OPT_SELECT:-L}" --cudal1-time-budget="${KB_BUDGET:-2}" ${OPT_ARGS:-} \
                --cudal1-ledger="$stage/optimize-ledger.jsonl" --cudal1-db="$stage/exemplars.sqlite" \
                --cudal1-out="$stage/optimized" --cudal1-html="$stage/optimize-report.html" >>"$stage/optimize.log" 2>&1 ;;
        cheats)
            python3 -m pytest "${common[@]}" --cudal1-candidates=benchmarks/release/redteam_release.jsonl \
                --cudal1-ledger="$stage/release-ledger.jsonl" >"$stage/release.log" 2>&1 ;;
        timing)
            python3 benchmarks/timing_quality.py --tasks .device/kb_l1.jsonl --out "$stage/timing-quality.json" \
                --only "${TQ_ONLY:-precision,accuracy,side_stream,overhead,end_to_end}" ${TQ_ARGS:-} \
                >"$stage/timing-quality.log" 2>&1 ;;
        checkcosts)  # what one timed sample's checks cost per call (digests, sampled elements, their comparison)
            python3 benchmarks/check_costs.py --out "$stage/check-costs.jsonl" >"$stage/checkcosts.log" 2>&1 ;;
        calloverhead)  # issue 14 item 15: the harness's per-call overhead on the eager path beside a bare call
            python3 benchmarks/call_overhead.py --out "$stage/call-overhead.json" >"$stage/calloverhead.log" 2>&1 ;;
        train)
            python3 benchmarks/train_smoke.py --tasks .device/kb_rewrites.jsonl --out "$stage/train" \
                --steps "${TRAIN_STEPS:-30}" >"$stage/train.log" 2>&1
            rm -rf "$stage/train/model" "$stage/train/work" "$stage/train/train/rl/final" ;;
        throughput)  # and again with TP_ARGS2, TP_ARGS3 where set (levers against the same machine)
            throughput_run throughput ${TP_ARGS:-}; failed=$?
            [ -z "${TP_ARGS2:-}" ] || throughput_run throughput-2 ${TP_ARGS2} || failed=1
            [ -z "${TP_ARGS3:-}" ] || throughput_run throughput-3 ${TP_ARGS3} || failed=1
            (exit "$failed") ;;
        *) echo "unknown phase $phase" ;;
    esac
    rc=$?
    echo "phase $phase: rc=$rc in $(( $(date +%s) - start )) s, from $(date -u -d "@$start" +%T) UTC" \
        | tee -a "$stage/phases.log"
    tail -n 25 "$stage"/*"${phase}"*.log 2>/dev/null | tail -n 30
    nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
        --format=csv,noheader >>"$stage/nvidia-smi.csv"
    pack
done
kill "$packer" "$tracer" 2>/dev/null
pack
