"""Runs over designs and fleets: a training run's reliability and cost, and design search.

``reliability`` turns a step into a run (interruptions, checkpoints, goodput, time to train);
``explore`` evaluates a design space on local or Dask engines.
"""
