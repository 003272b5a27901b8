"""`python -m tau2_a2a.cli`: the same as the `tau2-a2a` command."""

from tau2_a2a.cli import main

raise SystemExit(main())
