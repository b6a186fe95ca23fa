"""The Models page: the library of GGUF files, what a file says, Load/Unload and the other
actions, and Find models (Hugging Face search, files, downloads, token)."""
