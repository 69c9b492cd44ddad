"""The board rule-set: an 11x11 map-placement puzzle scored by four mission cards per season (seed 002)."""
