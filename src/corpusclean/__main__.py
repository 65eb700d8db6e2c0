"""`python -m corpusclean COMMAND ...`: the same entry point as the `corpusclean` command."""

import sys

from corpusclean.jobs.cli import main

sys.exit(main())
