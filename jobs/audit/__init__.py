"""Data-quality suites (GX JSON) on Spark, and their JUnit form."""
