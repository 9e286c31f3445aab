"""`python -m mt.train` (what torchrun launches): the same as `mt-train`."""

from mt.cli.train import main

if __name__ == "__main__":
    main()
