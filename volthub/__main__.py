import sys

from volthub.cli import main

sys.exit(main())
