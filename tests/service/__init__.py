"""Tests of tau2_a2a.service, the evaluation service: over A2A, ADK, AgentBeats, replicas, restarts, attacks."""
