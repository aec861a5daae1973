"""`python -m demo_data.sample`: writes the bundled sample (see the package docstring)."""

import sys

from demo_data.sample.build import main

sys.exit(main())
