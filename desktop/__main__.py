import sys

from desktop.cli import main

if __name__ == "__main__":
    if getattr(sys, "frozen", False):
        # The llama.cpp worker is a spawned process; in a frozen bundle it re-enters here.
        # (Elsewhere freeze_support does nothing, and importing multiprocessing costs ~10 ms
        # of the window's start.)
        import multiprocessing

        multiprocessing.freeze_support()
    raise SystemExit(main())
