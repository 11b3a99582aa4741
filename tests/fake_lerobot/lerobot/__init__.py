"""A stand-in for the `lerobot` package (0.4's names and signatures, a tiny linear policy): what
learners.agents.lerobot_base calls, for tests on a machine where the real package cannot be installed beside our
torch."""
