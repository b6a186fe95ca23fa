"""Shared pieces every feature uses: the theme, small widgets, plain labels and tooltips,
elided labels, safe documents, text formatting, resources, the asyncio loop on Qt and the door
for blocking calls, read-only tables of figures and the export buttons with their file
writing, the composer that takes files, and
callbacks that hold their owner weakly (``weak``)."""
