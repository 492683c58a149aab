from infscale.cli import main

raise SystemExit(main())
