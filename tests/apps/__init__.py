"""Tests of tau2_a2a.apps: the protocol A/B and merging shards' results files."""
