"""The pure write model: envelopes, codec, the Decider kernel, dice discipline and the rule-sets."""
