"""Reference participants for offline runs: the oracle agent and the scripted user."""
