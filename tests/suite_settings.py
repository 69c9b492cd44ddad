"""The settings the suite's own gateways run with: a deployment's defaults, the rate limits at 1,000 a second.

The suite plays whole games from one address at a pace no person keeps; a deployment's limits (services/settings.py)
would refuse it. Stacks the suite starts read them from the environment (tests/conftest.py sets it); gateways built
in process from ``suite_settings``. The deployment's own defaults are attacked in
tests/gateway/test_gateway_rate_limits.py.
"""

from __future__ import annotations

from almanac.services.settings import Settings, load_settings

SUITE_RATE = "1000/second"
SUITE_RATES = {"rate_anon": SUITE_RATE, "rate_commands": SUITE_RATE}


def suite_settings(**overrides: object) -> Settings:
    """The settings of no environment (``load_settings({})``) with the suite's rate limits, ``overrides`` on top."""
    return load_settings({}, **{**SUITE_RATES, **overrides})
