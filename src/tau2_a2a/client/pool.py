"""This process's sessions, one per agent configuration, all closed when the process exits."""

from __future__ import annotations

import atexit
import threading

from tau2_a2a.client.session import A2ASession
from tau2_a2a.config import A2AConfig


class _SessionPool:
    """Sessions by their whole configuration (endpoint, token, binding, streaming, ...) for this process."""

    def __init__(self) -> None:
        self._sessions: dict[A2AConfig, A2ASession] = {}
        self._lock = threading.Lock()

    def get(self, config: A2AConfig) -> A2ASession:
        with self._lock:
            session = self._sessions.get(config)
            if session is None:
                session = self._sessions[config] = A2ASession(config)
            return session

    def close_all(self) -> None:
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            session.close()


sessions = _SessionPool()
atexit.register(sessions.close_all)
