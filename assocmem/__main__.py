import sys

from assocmem.cli import main

sys.exit(main())
