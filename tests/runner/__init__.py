"""Tests of tau2_a2a.runner: a run, resume, Ray, scale, the Python API, protocol metrics."""
