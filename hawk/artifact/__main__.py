"""`python -m hawk.artifact ...`: see hawk.artifact.cli."""

from hawk.artifact.cli import main

raise SystemExit(main())
