"""The ``mjx`` kind's tests (helpers: ``mjx_helpers``).

Those that run JAX skip, naming the extra to install, where it is missing; CI installs it
(``pip install -e '.[dev,mjx]'``), so there they run.
"""

from __future__ import annotations

import sys
from pathlib import Path

# As in tests/hardening: only tests/ is on sys.path, so this directory goes there too, for
# ``import mjx_helpers``.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
