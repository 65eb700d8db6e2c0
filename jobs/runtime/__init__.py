"""How a job runs: config, the Spark session, logging, the runner, errors' exits."""
