"""`python -m dlk8s.cli.convert`: the command without the rest of the operator."""

import sys

from dlk8s.cli.convert.command import main

sys.exit(main())
