"""Where the repository is, for tests that read its files or run its commands in it."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
