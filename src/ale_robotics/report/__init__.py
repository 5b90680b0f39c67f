"""The runs as a static, self-contained HTML site, and a local server to browse it.

* :mod:`.site`  ``build_site``: the leaderboard, every run, one page per run
* :mod:`.pages` what a run page shows, as plain data (tested without a browser)
* :mod:`.serve` ``ale-robotics view``: the site on a loopback HTTP server

Templates and the stylesheet are package data (``templates/``); pages are
rendered with autoescaping on, since agents write part of what they show.
This package reads run directories (``harness.report``, ``runs``, ``trajectory``)
and never imports the evaluator core, the harness's run loop or the CLI.
"""

from ale_robotics.report.serve import ReportServer, serve_directory
from ale_robotics.report.site import MARKER, SiteBuild, build_site, page_name

__all__ = ["MARKER", "ReportServer", "SiteBuild", "build_site", "page_name", "serve_directory"]
