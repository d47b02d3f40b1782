"""``python -m looptrace.tracer.cli``: the ``looptrace`` command."""

import sys

from .main import main

sys.exit(main())
