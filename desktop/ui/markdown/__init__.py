"""Reply text as it streams and once finished: the streaming text, the Markdown layout,
renderer, selection and view, and what a screen reader reads of it."""
