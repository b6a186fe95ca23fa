"""The Stats page and the reply timeline: the dashboard, its charts and data, the ratings from
votes, the timeline chart, panel and its help."""
