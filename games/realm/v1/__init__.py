"""The realm rule-set: cities that mine, smelt, forage, fortify, raid, pillage and trade by dice (seed 003)."""
