"""Test settings for the A2C plugin."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

# The suite imports test modules by path (importlib mode); make the shared
# helper module of this folder importable.
sys.path.insert(0, str(Path(__file__).parent))

# Tests run on small shared CPUs: one intra-op thread avoids oversubscription.
torch.set_num_threads(1)
