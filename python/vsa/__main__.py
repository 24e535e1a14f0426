"""`python -m vsa ...` runs the `vsa` command."""

import sys

from vsa.cli import main

sys.exit(main())
