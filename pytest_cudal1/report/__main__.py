"""``python -m pytest_cudal1.report``: the ``cudal1-report`` command."""

import sys

from pytest_cudal1.report.cli import main

sys.exit(main())
