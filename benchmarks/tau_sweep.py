"""What the bucket sampler's temperature τ does to the exemplar pairs it draws.

    python benchmarks/tau_sweep.py [--corpus /work/shared/cudal1/a100.jsonl] [--out results.json]

For each τ, draws many pairs with ``policy.sampler.BucketSampler`` from a corpus
of speedups and reports the pairs' mean speedup, the spread within a pair (the
faster over the slower: the contrast the prompt asks the model to explain) and
how many buckets the draws really use (exp of the entropy of bucket draws).
Until a release has been re-judged on a GPU, the corpus is the release's
*published* ``score_default`` values: a stand-in for the shape of a speedup
distribution, never an exemplar score. Re-run with ``--corpus`` pointing at an
exemplar database (``.sqlite``) once it holds re-judged speedups.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from policy.sampler import DEFAULT_BUCKETS, BucketSampler  # noqa: E402

TAUS = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 1e9)  # 1e9: uniform over buckets
DRAWS = 20000


def load_corpus(path: Path) -> tuple[list[float], str]:
    """Speedups and what they are: published release scores (JSONL) or measured exemplar speedups (SQLite)."""
    if path.suffix in (".sqlite", ".db"):
        from policy.exemplars import ExemplarDB

        with ExemplarDB(path) as db:
            return [e.speedup for e in db.all() if e.reason == "OK" and e.speedup], "measured (exemplar database, OK)"
    scores = [json.loads(line).get("score_default") for line in path.read_text().splitlines() if line.strip()]
    return [float(s) for s in scores if s is not None], "PUBLISHED score_default (not re-judged; a stand-in corpus)"


def sweep(speedups: list[float], buckets: int, seed: int) -> list[dict[str, float]]:
    rows = []
    for tau in TAUS:
        sampler = BucketSampler(score=lambda x: x[1], tau=tau, buckets=buckets)
        bucket_of = {item: i for i, b in enumerate(sampler.bucketize(list(enumerate(speedups)))) for item in b}
        rng = random.Random(seed)
        drawn, ratios, used = [], [], Counter()
        for _ in range(DRAWS):
            pair = sampler.sample(list(enumerate(speedups)), rng)
            drawn += [s for _, s in pair]
            ratios.append(max(s for _, s in pair) / min(s for _, s in pair))
            used.update(bucket_of[item] for item in pair)
        total = sum(used.values())
        entropy = -sum(c / total * math.log(c / total) for c in used.values())
        rows.append({
            "tau": tau, "mean_speedup": statistics.fmean(drawn), "median_speedup": statistics.median(drawn),
            "mean_log2_speedup": statistics.fmean(math.log2(s) for s in drawn),
            "pair_ratio_median": statistics.median(ratios), "pair_ratio_p10": statistics.quantiles(ratios, n=10)[0],
            "effective_buckets": math.exp(entropy),
        })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path("/work/shared/cudal1/a100.jsonl"))
    parser.add_argument("--buckets", type=int, default=DEFAULT_BUCKETS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    speedups, kind = load_corpus(args.corpus)
    result = {
        "corpus": str(args.corpus), "scores": kind, "codes": len(speedups), "buckets": args.buckets,
        "draws_per_tau": DRAWS, "pairs_of": 2, "seed": args.seed,
        "corpus_mean": statistics.fmean(speedups), "corpus_median": statistics.median(speedups),
        "sweep": sweep(speedups, args.buckets, args.seed),
    }
    print(f"{kind}: {len(speedups)} codes, mean {result['corpus_mean']:.2f}x, median {result['corpus_median']:.2f}x")
    print(f"{'tau':>8} {'mean':>7} {'median':>7} {'pair ratio med':>15} {'p10':>6} {'eff. buckets':>13}")
    for r in result["sweep"]:
        print(f"{r['tau']:>8g} {r['mean_speedup']:>7.2f} {r['median_speedup']:>7.2f} {r['pair_ratio_median']:>15.2f} "
              f"{r['pair_ratio_p10']:>6.2f} {r['effective_buckets']:>13.2f}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
