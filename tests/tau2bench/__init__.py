"""Tests of tau2_a2a.tau2bench, the seam to tau2: environments, results file, domains, the user simulator."""
