import sys

from finops.cli import main

sys.exit(main())
