"""The built-in games: each a rule-set package beside the kernel, found like any plugin (``almanac.rulesets``)."""
