"""Applications built on runs: each starts or reads whole runs and makes something of them.

ab.py runs one model twice, as tau2's native agent and over A2A, and puts the
two runs side by side (the protocol A/B); merge.py makes the results files of
shards one run. A run itself (runner/) knows nothing of them.
"""
