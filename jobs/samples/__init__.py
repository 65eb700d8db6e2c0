"""Generated corpora for the demo, the tests and the benchmarks."""
