"""What the model's results say, computed once for every front end.

``summaries`` holds the headline numbers the pages and the HTML report share (step shares,
per-dimension breakdown, vendor rows); ``citations`` gathers the sources and formulas behind
them from the data files; ``export`` writes the deployment files (cabling plan, scheduler
topology, graph, NCCL tuner CSV) from the same build.
"""
