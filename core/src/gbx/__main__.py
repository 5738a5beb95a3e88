"""``python -m gbx`` runs the same CLI as the ``gbx`` console script."""

from gbx.cli import main

if __name__ == "__main__":
    main()
