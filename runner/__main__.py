"""``python -m runner``: the operation Job's entrypoint."""

from runner.run import main

raise SystemExit(main())
