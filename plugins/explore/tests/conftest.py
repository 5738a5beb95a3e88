"""Test settings for the explore plugin."""

from __future__ import annotations

import torch

# Tests run on small shared CPUs: one intra-op thread avoids oversubscription.
torch.set_num_threads(1)
