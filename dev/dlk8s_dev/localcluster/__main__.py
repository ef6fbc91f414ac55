"""``python -m dlk8s_dev.localcluster``: what `make cluster` used to run; the
code is in clustercli.py now."""

from ..clustercli import main

if __name__ == "__main__":
    raise SystemExit(main())
