"""``cudal1-train CONFIG``: run the training stages a config file describes (``policy.train_config``)."""

from __future__ import annotations

import argparse
import sys

from policy.train_config import ConfigError, TrainConfig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cudal1-train", description=__doc__)
    parser.add_argument("config", help="a .toml or .json TrainConfig file")
    parser.add_argument("--resume", action="store_true", help="continue the run in the config's output_dir")
    args = parser.parse_args(argv)
    try:
        config = TrainConfig.from_file(args.config)
    except ConfigError as exc:
        print(f"cudal1-train: {exc}", file=sys.stderr)
        return 2
    if args.resume:
        config.resume = True
    from policy.trainer import run_training

    result = run_training(config)
    print(f"cudal1-train: stages run: {', '.join(result.stages_run) or 'none'}; metrics in {result.metrics_log}, "
          f"ledger {result.ledger}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
