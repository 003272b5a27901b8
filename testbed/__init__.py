"""Real local parts that the tests and the benchmarks start: PostgreSQL, a stand-in LLM server, headless Chromium,
and an a2a-sdk 0.3 client (run by .venv-a2a03's python). Not part of the installed package."""
