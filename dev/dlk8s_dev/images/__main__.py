"""``python -m dlk8s_dev.images``: cli.py."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
