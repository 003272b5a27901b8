"""Test-only helpers: misbehaving agents, middleware, runs, the service, processes. Fixtures are in tests/conftest.py."""
