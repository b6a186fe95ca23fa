"""Many agents at once: side-by-side columns, the agent picker, blind votes, prompt-set runs
and their results table."""
