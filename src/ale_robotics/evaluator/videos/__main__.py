"""``python -m ale_robotics.evaluator.videos FOLDER``: the renderer process (:mod:`.render`)."""

import sys

from ale_robotics.evaluator.videos.render import main

sys.exit(main())
