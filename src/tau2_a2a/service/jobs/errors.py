"""The one error type of the evaluation jobs, and its case for an evaluation nobody knows."""

from __future__ import annotations


class EvaluationError(ValueError):
    """A request the service cannot accept or answer now; the message says why and what to do."""


class EvaluationNotFound(EvaluationError):
    """No evaluation has that id (or the id is not one)."""
