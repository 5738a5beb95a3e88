"""gbx-explore: exploration from a device-resident archive of env states (Go-Explore style)
and a count-based pixel novelty bonus, for any env with the ``SnapshotEnv`` capability."""

__version__ = "0.1.0"
