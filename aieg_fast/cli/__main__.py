"""``python -m aieg_fast.cli``: the ``aieg-fast`` command."""
import sys

from . import main

sys.exit(main())
