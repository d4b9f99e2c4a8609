#!/usr/bin/env bash
# The carry folders benchmarks/gpu_session.sh reads, rebuilt from ../shared (they are never committed and a new
# checkout has none):
#   .device/  a100.jsonl, problems.jsonl, anchors/ (copies), kb_l1.jsonl and kb_optimize.jsonl (the committed task
#             lists), release_all.jsonl (a100.jsonl with "name": "line<N>", N its line, so release parts judged
#             in several calls keep one naming) and release_load_inline.jsonl (its load_inline records)
#   .whl/     a numpy wheel the GPU image's numba accepts (cp312)
# Then pass carry [".device", ".whl"] to the device tool.
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${SHARED:-../shared}
mkdir -p .device .whl
cp "$shared/cudal1/a100.jsonl" "$shared/kernelbench/problems.jsonl" .device/
cp -r "$shared/anchors" .device/
chmod -R u+w .device
python3 benchmarks/select_tasks.py benchmarks/gpu_l1_tasks.txt .device/problems.jsonl .device/kb_l1.jsonl
python3 benchmarks/select_tasks.py benchmarks/gpu_optimize_tasks.txt .device/problems.jsonl .device/kb_optimize.jsonl
python3 - <<'PY'
import json

with open(".device/a100.jsonl") as src, open(".device/release_all.jsonl", "w") as dst, \
        open(".device/release_load_inline.jsonl", "w") as compiled:
    for n, line in enumerate(src, 1):
        rec = json.dumps({**json.loads(line), "name": f"line{n}"}) + "\n"
        dst.write(rec)
        if "load_inline" in (json.loads(line).get("custom_code") or ""):  # they build for minutes: a part of their own
            compiled.write(rec)
PY
pip download -q numpy==2.3.5 --python-version 3.12 --only-binary=:all: --platform manylinux_2_28_x86_64 --no-deps -d .whl
du -sh .device .whl
