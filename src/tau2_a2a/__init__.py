"""tau2-a2a: evaluate any A2A agent with tau2-bench, and offer tau2 evaluations over A2A.

The package's rooms: `protocol` (the A2A forms of tau2's turns), `client`
(speaking A2A to the agent under test), `tau2bench` (the one seam to tau2),
`runner` (a run, in one process or on Ray), `service` (tau2 evaluations as an
A2A service), `compare` (reports), `apps` (applications built on runs: the
protocol A/B, merging shards), `reference` (reference A2A agents) and `cli`
(the command line). `tau2_a2a.api` is the Python entry point. Importing the
package changes nothing in the process.
"""
