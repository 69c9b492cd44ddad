"""board@2: board@1 with an opt-in turn time limit (``turn_limit_s``); opt-in by its full name."""
