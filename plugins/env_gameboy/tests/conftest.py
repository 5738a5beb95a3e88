"""Shared set-up of the Game Boy plugin's tests.

The suite runs in pytest's importlib mode (several packages have test modules
of the same name), which does not put this folder on sys.path by itself; the
helper modules beside the tests (small ROM builders, the reference renderer)
are imported by name.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
# The shared test ROMs sit beside the checkout (../shared/testroms), wherever pytest runs from.
os.environ.setdefault("GBX_TESTROMS",
                      str(Path(__file__).resolve().parents[4] / "shared" / "testroms"))
