"""Tests of tau2_a2a.runner: a run, resume, Ray, scale, merge, the Python API, A/B runs, protocol metrics."""
