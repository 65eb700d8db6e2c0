"""`bench`'s measurements: storage, loaders, throughput, its page."""
