from tau2_a2a.cli import main

raise SystemExit(main())
