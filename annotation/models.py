"""The crowd: campaigns, tasks, workers, assignments and votes (built by the campaign issues)."""
