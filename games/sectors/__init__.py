"""The `sectors` rule-set: one owner's colony on a grid of land sectors (seed 000), as a Decider."""
