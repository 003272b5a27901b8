"""Tests of tau2_a2a.reference: the reference A2A agents (the baseline LLM agent, the ADK agent)."""
