"""A REST adapter for Prolific's API: the link-out provider makes its calls through it when a
campaign's ``provider_config["api"]`` is ``"prolific"``.

Base URL and token come from the settings PROLIFIC_API_URL and PROLIFIC_API_TOKEN (environment);
the token is sent as ``Authorization: Token <token>``. Only the standard library is used
(urllib), so tests point the base URL at a local HTTP server that answers like Prolific.

Calls: create / publish / pause / start / stop a study, change its places, list its submissions,
approve or reject a submission (and approve in bulk), and bonus payments (create, then pay).
Errors come back as ``ProviderError``: 401/403 "credentials", 429 and 5xx retryable.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from decimal import Decimal

from django.conf import settings

from .base import ProviderError

DEFAULT_URL = "https://api.prolific.com"


class ProlificClient:
    def __init__(self, base_url: str | None = None, token: str | None = None, timeout: float = 20.0):
        self.base_url = (base_url or settings.PROLIFIC_API_URL or DEFAULT_URL).rstrip("/")
        self.token = token if token is not None else settings.PROLIFIC_API_TOKEN
        self.timeout = timeout

    @property
    def configured(self) -> bool:
        return bool(self.token)

    # -- transport ---------------------------------------------------------------------------------
    def _call(self, method: str, path: str, body: dict | None = None, query: dict | None = None):
        if not self.token:
            raise ProviderError("The Prolific API token is not set (PROLIFIC_API_TOKEN in the environment).",
                                code="credentials")
        url = f"{self.base_url}/api/v1/{path.lstrip('/')}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method, headers={
            "Authorization": f"Token {self.token}", "Accept": "application/json",
            **({"Content-Type": "application/json"} if data is not None else {})})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            if exc.code in (401, 403):
                raise ProviderError(f"Prolific refused the API token ({exc.code}): {detail}",
                                    code="credentials") from None
            if exc.code == 429 or exc.code >= 500:
                raise ProviderError(f"Prolific is busy ({exc.code}); try again later.", code="throttled",
                                    retryable=True) from None
            raise ProviderError(f"Prolific answered {exc.code}: {detail}", code="api_error") from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise ProviderError(f"Prolific could not be reached: {exc}", code="network", retryable=True) from None
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError:
            raise ProviderError("Prolific answered something that is not JSON.", code="api_error") from None

    # -- studies -----------------------------------------------------------------------------------
    def create_study(self, *, name: str, description: str, external_url: str, places: int, reward_cents: int,
                     minutes: int, completion_code: str, internal_name: str = "") -> dict:
        return self._call("POST", "studies/", {
            "name": name, "internal_name": internal_name or name, "description": description,
            "external_study_url": external_url, "prolific_id_option": "url_parameters",
            "completion_codes": [{"code": completion_code, "code_type": "COMPLETED",
                                  "actions": [{"action": "MANUALLY_REVIEW"}]}],
            "total_available_places": int(places), "estimated_completion_time": int(minutes),
            "reward": int(reward_cents), "device_compatibility": ["desktop", "tablet", "mobile"],
        })

    def transition_study(self, study_id: str, action: str) -> dict:
        if action not in ("PUBLISH", "PAUSE", "START", "STOP"):
            raise ProviderError(f"Unknown study action {action!r}.", code="bad_action")
        return self._call("POST", f"studies/{urllib.parse.quote(study_id)}/transition/", {"action": action})

    def publish_study(self, study_id: str) -> dict:
        return self.transition_study(study_id, "PUBLISH")

    def pause_study(self, study_id: str) -> dict:
        return self.transition_study(study_id, "PAUSE")

    def start_study(self, study_id: str) -> dict:
        return self.transition_study(study_id, "START")

    def stop_study(self, study_id: str) -> dict:
        return self.transition_study(study_id, "STOP")

    def set_places(self, study_id: str, places: int) -> dict:
        return self._call("PATCH", f"studies/{urllib.parse.quote(study_id)}/", {"total_available_places": int(places)})

    # -- submissions -------------------------------------------------------------------------------
    def list_submissions(self, study_id: str) -> list[dict]:
        results, page = [], 1
        while True:
            answer = self._call("GET", f"studies/{urllib.parse.quote(study_id)}/submissions/", query={"page": page})
            results.extend(answer.get("results") or [])
            if not answer.get("_links", {}).get("next", {}).get("href") or page > 1000:
                return results
            page += 1

    def approve(self, submission_id: str) -> dict:
        return self._transition_submission(submission_id, {"action": "APPROVE"})

    def reject(self, submission_id: str, message: str, category: str = "LOW_EFFORT") -> dict:
        return self._transition_submission(submission_id, {"action": "REJECT", "message": message,
                                                           "rejection_category": category})

    def _transition_submission(self, submission_id: str, body: dict) -> dict:
        try:
            return self._call("POST", f"submissions/{urllib.parse.quote(submission_id)}/transition/", body)
        except ProviderError as exc:  # already in that state: not an error (idempotent)
            if exc.code == "api_error" and "already" in exc.message.lower():
                return {"id": submission_id, "status": "APPROVED" if body["action"] == "APPROVE" else "REJECTED"}
            raise

    def bulk_approve(self, study_id: str, participant_ids: list[str]) -> dict:
        return self._call("POST", "submissions/bulk-approve/", {"study_id": study_id,
                                                                "participant_ids": list(participant_ids)})

    # -- bonuses -----------------------------------------------------------------------------------
    def create_bonuses(self, study_id: str, bonuses: list[tuple[str, int]]) -> dict:
        """``bonuses``: (participant id, cents). Prolific takes "participant_id,amount" lines."""
        csv_text = "\n".join(f"{pid},{Decimal(cents) / 100:.2f}" for pid, cents in bonuses)
        return self._call("POST", "submissions/bonus-payments/", {"study_id": study_id, "csv_bonuses": csv_text})

    def pay_bonuses(self, bulk_id: str) -> dict:
        return self._call("POST", f"bulk-bonus-payments/{urllib.parse.quote(bulk_id)}/pay/", {})


__all__ = ["ProlificClient"]
