"""Each evaluation's HTML report, `GET /evaluations/{evaluation_id}/report`: the page `tau2-a2a report` writes.

The page is built from the evaluation's results file with the report's own code
(tau2_a2a.compare), so it shows the same figures as `tau2-a2a report` run on that
file. A finished evaluation's page is built once and kept in its directory
(`report.html`): its results file no longer changes, building the page takes a
second or so of CPU (charts, bootstrap intervals), and replicas sharing the
results directory then serve the same file. A running evaluation's page is
built on each request, from the simulations finished so far. The route sits
behind the service's bearer auth like every route but the card.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from tau2_a2a.files import PRIVATE_FILE, write_whole
from tau2_a2a.service import summary
from tau2_a2a.service.jobs.errors import EvaluationError, EvaluationNotFound
from tau2_a2a.service.jobs.evaluation import ID_PATTERN, TERMINAL
from tau2_a2a.service.jobs.manager import EvaluationManager

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

REPORT_PATH = "/evaluations/{evaluation_id}/report"
REPORT_NAME = "report.html"
_building = threading.Lock()  # one page at a time: each takes a core for a moment


class ReportUnavailable(Exception):
    """No page to answer with: `status` is the HTTP status, the message says why and what to do."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def report_url(public_url: str, evaluation_id: str) -> str:
    """The report's absolute URL on the service at `public_url`."""
    return public_url.rstrip("/") + REPORT_PATH.format(evaluation_id=evaluation_id)


def report_page(manager: EvaluationManager, evaluation_id: str) -> str:
    """The evaluation's HTML report, or ReportUnavailable saying why there is none."""
    if not ID_PATTERN.match(evaluation_id):
        raise ReportUnavailable(f"No evaluation {evaluation_id!r} in this service: ids look like ev-0123456789ab. "
                                "Use list_evaluations to see the known ones.", 404)
    try:
        view = manager.get(evaluation_id)
        path = manager.results_path(evaluation_id)
    except EvaluationNotFound as error:
        raise ReportUnavailable(str(error), 404) from None
    except EvaluationError as error:  # the database did not answer
        raise ReportUnavailable(str(error), 503) from None
    finished = view.status in TERMINAL
    cached = path.with_name(REPORT_NAME)
    if finished and cached.exists():
        return cached.read_text(encoding="utf-8")
    if not ((summary.read_results(path) or {}).get("simulations")):
        raise ReportUnavailable(f"Evaluation {evaluation_id} has no finished simulation yet ({view.status.value}); "
                                "its report exists once one has finished.", 404)
    with _building:
        page = build_page(path, evaluation_id)
    if finished:
        write_whole(cached, page, PRIVATE_FILE)  # a replica reading it meanwhile sees the old file or none
    return page


def build_page(path: Path, label: str) -> str:
    """The page `tau2-a2a report` writes for the results file at `path`, its run labelled `label`."""
    from tau2_a2a.compare import html
    from tau2_a2a.compare.report import build
    from tau2_a2a.compare.runs import ReportError, parse_runs

    try:
        runs = parse_runs([f"{label}={path}"])
    except ReportError:  # caught mid-rewrite (tau2 rewrites the file after every simulation)
        raise ReportUnavailable(f"The results of evaluation {label} are being written; ask again in a moment.",
                                503) from None
    return html.render(build(runs), runs)


def report_route(manager: EvaluationManager) -> Route:
    """The Starlette route answering the page, or a JSON error naming what is missing."""
    from starlette.responses import HTMLResponse, JSONResponse
    from starlette.routing import Route

    async def report(request: Request) -> Response:
        try:
            page = await asyncio.to_thread(report_page, manager, request.path_params["evaluation_id"])
        except ReportUnavailable as error:
            return JSONResponse({"error": str(error)}, status_code=error.status)
        return HTMLResponse(page, headers={"Cache-Control": "private, no-cache"})

    return Route(REPORT_PATH, report, methods=["GET"])
