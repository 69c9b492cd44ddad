"""The read side: pure projection folds over events, the read-model store and the projector worker."""
