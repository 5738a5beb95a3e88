"""gbx plugin: benchmark tools over any registered algorithm, env and run.

``gbx bench train`` (training throughput, soak test), ``profile`` (where a run's time
goes), ``compare``/``plot`` (benchmark records side by side, scaling plots) and
``runs`` (throughput and scaling efficiency of finished runs).
"""
