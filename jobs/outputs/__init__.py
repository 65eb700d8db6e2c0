"""How a run stages, locks, resumes and publishes its output, and the dedup index."""
