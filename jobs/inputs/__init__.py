"""What a job is given: paths, input files, reading and checking them."""
