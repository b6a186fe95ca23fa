import multiprocessing

from desktop.cli import main

if __name__ == "__main__":
    # The llama.cpp worker is a spawned process; in a frozen bundle it re-enters here.
    multiprocessing.freeze_support()
    raise SystemExit(main())
