"""Configuration: the typed Hydra schema and each architecture's model options. Free of torch."""
