"""Tests of tau2_a2a.client: sessions, bindings, failures, discovery, target policy, the bearer token."""
