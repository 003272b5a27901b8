"""Environments built fast: each domain's database read once per process and copied only where a
simulation writes (`environments`, `copy_on_access`), with scores unchanged."""
