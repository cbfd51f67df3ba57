"""python -m recbole_mgformer.benchmark"""

import sys

from recbole_mgformer.benchmark import main

sys.exit(main())
