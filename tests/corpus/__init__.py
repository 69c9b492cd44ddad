"""The grown corpus (beside the frozen golden one): its games, loader and replay test."""
