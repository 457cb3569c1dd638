import sys

from kubectl_ptah.cli import main

sys.exit(main())
