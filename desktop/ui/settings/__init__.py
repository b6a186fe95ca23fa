"""The Settings dialog: its pages and parts, the tools page and the MCP server dialog, the
cached reads it shows, and applying the theme and text size."""
