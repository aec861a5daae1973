"""`python -m demo_data.backbone`: pretrains the demo's backbone (see the package docstring)."""

from demo_data.backbone.main import main

main()
