"""``python -m rocm_dl_guide``: the guide's command line."""

import sys

from rocm_dl_guide.cli import main

sys.exit(main())
