import sys

from seahorse_metrics.cli import main

sys.exit(main())
