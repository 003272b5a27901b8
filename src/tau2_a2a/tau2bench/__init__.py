"""The seam between tau2-a2a and tau2-bench.

Every part of tau2-a2a that needs tau2's internals goes through this package,
so that a change in tau2 (a new release, the other distribution) is met in one
place. For now it holds `environments`: tau2's domain environments, built from
databases read once per process.
"""
