"""Tests of tau2_a2a.protocol: A2A message forms, tool calls, cards, conformance, 0.3 clients."""
