"""Dice duel: two players roll two dice a round, in secret; when both have rolled, the higher total wins the round."""
