"""Tests of testbed/: the real local parts the tests start are what they claim to be."""
