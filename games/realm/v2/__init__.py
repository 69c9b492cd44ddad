"""realm@2: version 1 with one rule changed (in mining, each skull cancels one star); opt-in by its full name."""
