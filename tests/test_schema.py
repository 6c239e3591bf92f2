"""The OpenAPI schema of the whole API generates and validates without a warning."""
from django.core.management import call_command


def test_openapi_schema_is_valid_without_warnings(db, tmp_path):
    out = tmp_path / "schema.yml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    text = out.read_text()
    assert "/api/campaigns/{campaign_id}/next/" in text
    assert "/api/collections/" in text
