"""Golden logs: complete games of every published rule-set version, checked in and verified on every run."""
