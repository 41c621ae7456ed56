"""``python -m fabric_model``: see :mod:`fabric_model.cli`."""

import sys

from fabric_model.cli import main

sys.exit(main())
