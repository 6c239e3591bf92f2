"""The OpenAPI schema documents the errors every operation can answer with, not only its success.

drf-spectacular documents the success response of each operation; the API also answers, with a
JSON body, 400 (a body or a query parameter that fails validation), 401 (no or an expired token),
403 (the role does not allow it), 404 (an id that does not exist or that the caller may not see),
409 (a state that forbids the action: a frozen release, a finished run) and 429 (a login locked out
after too many failures). ``AutoSchema`` adds those that apply to each operation, so a client (or
schemathesis, tests/test_api_fuzz.py) can rely on the schema for every status code it gets.
"""
from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema

ERROR = {
    "type": "object",
    "description": "DRF's error body: {\"detail\": message}, or a message list per invalid field",
    "properties": {"detail": {"type": "string"}},
    "additionalProperties": True,
}
WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
DESCRIPTIONS = {
    "400": "Invalid input: the body or a query parameter, with a message per field",
    "401": "Not authenticated, or the token is invalid or expired",
    "403": "The caller's role does not allow this",
    "404": "No such object, or not one the caller may see",
    "409": "The object's state does not allow this now",
    "429": "Too many failed logins: locked out for a while",
}


class AutoSchema(SpectacularAutoSchema):
    def _error_codes(self) -> list[str]:
        method = self.method.upper()
        codes = ["400", "401", "403", "404"]  # 404 also for a page number past the end of a list
        if method in WRITE_METHODS:
            codes.append("409")
        if self.path.rstrip("/").endswith("/auth/token"):
            codes.append("429")
        return codes

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction=direction)
        for code in self._error_codes():
            if code not in responses:
                responses[code] = {
                    "description": DESCRIPTIONS[code],
                    "content": {"application/json": {"schema": ERROR}},
                }
        return responses
