"""``python -m ale_robotics`` is the ``ale-robotics`` command."""

from ale_robotics.cli.main import main

if __name__ == "__main__":
    main()
