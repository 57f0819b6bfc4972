"""Command line of the test bed: ``python -m awa_testbed --help``."""

import sys

from .cli import main

sys.exit(main())
