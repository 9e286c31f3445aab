"""Training: the update loop, loss, schedule, budget, validation, logging and the run directory."""
