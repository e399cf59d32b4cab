from __future__ import annotations

import sys

from greenloop.cli import main

sys.exit(main())
