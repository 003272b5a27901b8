"""The key under which tau2-a2a keeps a conversation's costs and times in a simulation's notes.

`accounting` writes it (and imports tau2); the metrics file and the report
read it from results files, without tau2.
"""

from __future__ import annotations

CONVERSATION_KEY = "tau2_a2a_conversation"
