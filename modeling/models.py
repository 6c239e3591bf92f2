"""The models: training runs and the model registry (built by the modeling issue)."""
