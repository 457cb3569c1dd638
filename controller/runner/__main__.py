"""``python -m controller.runner``: the operation Job's entrypoint."""

from controller.runner.run import main

raise SystemExit(main())
