"""The `claim` rule-set: an 8x8 timber claim on the Coeur d'Alene, seeded from its staking time."""
