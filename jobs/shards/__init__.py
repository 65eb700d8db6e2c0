"""Pack's shards: tar I/O, the commit protocol, staging, integrity, dataset card."""
