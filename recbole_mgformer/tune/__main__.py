"""python -m recbole_mgformer.tune"""

import sys

from recbole_mgformer.tune.cli import main

sys.exit(main())
