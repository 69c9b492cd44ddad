"""`almanac projector` in a real process, with the test rule-sets (counter, bazaar) registered first."""

import sys
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path[:0] = [str(here), str(here.parent)]

from counter_ruleset import COUNTER  # noqa: E402
from projection_games import BAZAAR  # noqa: E402,F401 - registers the trading rule-set

from almanac.events import registry  # noqa: E402
from almanac.services.cli import main  # noqa: E402

registry.register(COUNTER)
sys.argv = ["almanac", "projector", *sys.argv[1:]]
main()
