"""Tests of tau2_a2a.cli: the command line as a user types it, its arguments, errors and exit codes."""
