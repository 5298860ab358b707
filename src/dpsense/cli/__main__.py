"""``python -m dpsense.cli``."""

import sys

from dpsense.cli import main

sys.exit(main())
