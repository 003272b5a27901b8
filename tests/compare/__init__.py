"""Tests of tau2_a2a.compare: `tau2-a2a report`, its estimators and its page."""
