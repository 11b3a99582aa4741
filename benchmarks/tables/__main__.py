"""`python -m benchmarks.tables [--check]`: see the package docstring."""

import sys

from . import main

sys.exit(main())
