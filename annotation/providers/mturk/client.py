"""The boto3 ``mturk`` client and every call made through it.

``make_client`` builds a fresh client for ``settings.MTURK_ENDPOINT_URL`` (botocore's own retries
off); ``MTurkClientMixin`` holds the provider's client, backoff and attempt settings and its one
way to call MTurk, ``call``: throttling and network errors are retried with exponential backoff,
credential problems become a ``ProviderError`` with code ``credentials``, every other failure a
``ProviderError`` with MTurk's error code. ``check_credentials`` and ``credentials_status`` live
here too, since both are about reaching MTurk at all.
"""
from __future__ import annotations

import logging
import time

from django.conf import settings

from ..base import ProviderError

log = logging.getLogger(__package__)

RETRYABLE_CODES = {"ThrottlingException", "Throttling", "ServiceUnavailable", "ServiceUnavailableException",
                   "RequestThrottled", "TooManyRequestsException", "InternalFailure", "ServiceFault"}
CREDENTIAL_CODES = {"UnrecognizedClientException", "InvalidSignatureException", "AccessDeniedException",
                    "InvalidClientTokenId", "SignatureDoesNotMatch", "MissingAuthenticationToken",
                    "ExpiredTokenException", "IncompleteSignature"}


def make_client():
    import boto3
    from botocore.config import Config

    # A new session each time: the credentials are read from the environment as it is now
    # (boto3's default session would keep the first ones it found for the process's life).
    return boto3.session.Session().client(
        "mturk", endpoint_url=settings.MTURK_ENDPOINT_URL, region_name=settings.MTURK_REGION,
        config=Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=10, read_timeout=30))


class MTurkClientMixin:
    """The client half of ``MTurkProvider``: construction, the client, and ``call``."""

    def __init__(self, client=None, *, backoff_base: float | None = None, max_attempts: int | None = None,
                 sleep=time.sleep):
        self._client = client
        self._backoff_base = backoff_base
        self._max_attempts = max_attempts
        self.sleep = sleep

    def credentials_status(self, campaign) -> tuple[bool, str]:
        """Whether boto3 finds AWS credentials (environment, profile), without calling MTurk."""
        import boto3

        if boto3.session.Session().get_credentials() is None:
            return False, ("No AWS credentials for MTurk: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the "
                           "server's environment (or an AWS profile).")
        return True, f"AWS credentials found; MTurk endpoint {settings.MTURK_ENDPOINT_URL}."

    # -- the client and its calls --------------------------------------------------------------
    @property
    def client(self):
        if self._client is None:
            return make_client()  # a fresh client follows the settings of the moment
        return self._client

    @property
    def backoff_base(self) -> float:
        if self._backoff_base is not None:
            return self._backoff_base
        return float(settings.MTURK_BACKOFF_SECONDS)

    @property
    def max_attempts(self) -> int:
        return self._max_attempts or int(settings.MTURK_MAX_ATTEMPTS)

    def call(self, operation: str, client=None, **params) -> dict:
        """One MTurk operation (boto3 method name), throttling and network errors retried with
        exponential backoff; every other failure becomes a ProviderError."""
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            HTTPClientError,
            NoCredentialsError,
            PartialCredentialsError,
        )
        from botocore.exceptions import ConnectionError as BotoConnectionError

        client = client or self.client
        method = getattr(client, operation)
        attempt = 0
        while True:
            attempt += 1
            try:
                return method(**params)
            except (NoCredentialsError, PartialCredentialsError):
                raise ProviderError(
                    "No AWS credentials for MTurk: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the server's "
                    "environment (or an AWS profile) and try again. Nothing was published.",
                    code="credentials") from None
            except ClientError as exc:
                error = exc.response.get("Error", {})
                code, message = error.get("Code", ""), error.get("Message", "")
                if code in CREDENTIAL_CODES:
                    raise ProviderError(
                        f"MTurk refused the AWS credentials ({code}): check AWS_ACCESS_KEY_ID and "
                        "AWS_SECRET_ACCESS_KEY, and that the account is a requester on "
                        f"{settings.MTURK_ENDPOINT_URL}. Nothing was published.", code="credentials") from None
                status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
                retryable = code in RETRYABLE_CODES or status >= 500 or status == 429
                if retryable and attempt < self.max_attempts:
                    self._pause(attempt, operation, code)
                    continue
                raise ProviderError(f"MTurk {operation} failed: {code}: {message}".strip(), code=code or "mturk_error",
                                    retryable=retryable) from exc
            except (BotoConnectionError, HTTPClientError) as exc:
                if attempt < self.max_attempts:
                    self._pause(attempt, operation, type(exc).__name__)
                    continue
                raise ProviderError(f"MTurk could not be reached at {settings.MTURK_ENDPOINT_URL}: {exc}",
                                    code="network", retryable=True) from exc
            except BotoCoreError as exc:
                raise ProviderError(f"MTurk {operation} failed: {exc}", code="mturk_error") from exc

    def _pause(self, attempt: int, operation: str, why: str) -> None:
        delay = self.backoff_base * (2 ** (attempt - 1))
        log.warning("MTurk %s: %s, retry %d in %.2fs", operation, why, attempt, delay)
        if delay > 0:
            self.sleep(delay)

    def check_credentials(self, client=None) -> dict:
        """GetAccountBalance: the cheapest call that proves the credentials work."""
        return self.call("get_account_balance", client)
