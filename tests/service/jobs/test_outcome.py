"""An evaluation's end, read from its run's outcome file and said in the service's words."""

from __future__ import annotations

import json
from pathlib import Path


def test_an_evaluations_end_is_read_from_its_runs_outcome_file_and_said_in_the_services_words(tmp_path: Path) -> None:
    from tau2_a2a.runner.outcome_file import Failure, FailureKind, RunEnd, RunStatus, words_of, write_outcome
    from tau2_a2a.service.jobs.directory import outcome_file, results_file
    from tau2_a2a.service.jobs.evaluation import Status
    from tau2_a2a.service.jobs.outcome import Ending, ending

    def ended_with(message: str, kind: FailureKind = FailureKind.AGENT_AUTH, code: int = 2) -> None:
        write_outcome(outcome_file(tmp_path), RunEnd(RunStatus.FAILED, code,
                                                     failure=Failure(kind, message, words_of(message))))

    ended_with("The agent at http://a refused our credentials mid-run (HTTP 401), so the run stopped; its 3 "
               "finished simulations are kept in /r.json. Pass a valid bearer token with --a2a-auth-token or "
               "TAU2_A2A_AUTH_TOKEN and re-run the same command to resume. (token s3cret-1)")
    assert ending(tmp_path, 2, canceled=False, token="s3cret-1") == Ending(Status.FAILED, (
        "the evaluation process exited with code 2: The agent at http://a refused our credentials mid-run "
        "(HTTP 401), so the run stopped; its 3 finished simulations are kept in /r.json. Pass a valid bearer token "
        "with agent_auth_token and send the evaluation again. (token ***)"), ran_every_simulation=False)
    ended_with("The agent card at http://a names http://b for JSON-RPC; that URL is refused: 10.0.0.2 is a private "
               "address, and the allowed targets (public) do not include it. To allow it: --a2a-allowed-targets "
               "public,private", FailureKind.TARGET_REFUSED)
    assert ending(tmp_path, 2, canceled=False, token=None).error.endswith(
        "To allow it: --allowed-targets public,private")  # the operator's flag
    ended_with("1 of 2 simulations were not scored (...): judge down; running the same command again retries them.",
               FailureKind.UNSCORED, code=1)
    assert ending(tmp_path, 1, canceled=False, token=None).error == (
        "the evaluation process exited with code 1: 1 of 2 simulations were not scored (...): judge down; sending "
        "the evaluation again retries them.")
    assert ending(tmp_path, 1, canceled=True, token=None) == Ending(Status.CANCELED, None, False)

    write_outcome(outcome_file(tmp_path), RunEnd(RunStatus.A2A_ERRORS, 3, simulations=2, a2a_errors=1, unscored=0))
    assert ending(tmp_path, 3, canceled=False, token=None) == Ending(Status.FAILED, (  # no results file to show
        "the evaluation's run ended a2a_errors, but its results file is missing or cannot be read, so there is "
        "nothing to score; send the evaluation again."), True)
    results_file(tmp_path).parent.mkdir(exist_ok=True)  # the installed tau2's layout: maybe a run's directory
    results_file(tmp_path).write_text(json.dumps({"simulations": []}))
    assert ending(tmp_path, 3, canceled=True, token=None) == Ending(Status.COMPLETED, None, True)

    outcome_file(tmp_path).unlink()  # a child killed before its run could write how it ended
    assert ending(tmp_path, -9, canceled=False, token=None) == Ending(
        Status.FAILED, "the evaluation process was killed by SIGKILL before its run ended.", False)
