"""The Server page: the local API server (``desktop/serve``) started, stopped and watched from
the window: its address, how it is reached, the agents it serves, its keys, its requests."""
