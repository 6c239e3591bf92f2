"""A release in a real browser (Debian chromium through Playwright, live server, eager Celery).

Carol (admin) opens Releases from the menu, creates a release of a small collection with a
human-verified test split (a quality campaign's 2+ GOOD votes mark captions verified), freezes
it, reads the counts and the dataset card, exports it in every format and downloads one file,
whose bytes hash to the export's sha256. Screenshots go under the test's tmp_path (the ``shot`` fixture).
"""
import hashlib
import os

import pytest
from django.contrib.auth.models import Group
from django.db import connections

from captionlab import roles
from releases.models import Release, ReleaseExport

from .curation.test_release_services import FORMATS, make_collection, make_quality_campaign
from .test_browser import CHROMIUM, log_in

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # see test_browser.py

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium "
                       "(apt-get install chromium) to run the browser tests"),
]


@pytest.fixture
def setup(transactional_db, django_user_model, settings, eager_celery):
    # Everything in the database before the browser starts (see the browser fixture's note).
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    carol = django_user_model.objects.create_user(username="carol", password="carol-pw-123")
    carol.groups.add(Group.objects.get_or_create(name=roles.ADMIN)[0])
    collection = make_collection("Garden birds", n_images=10)
    campaign = make_quality_campaign(collection, name="Garden birds quality")
    return collection, campaign


def test_an_admin_freezes_a_release_with_a_verified_test_split_exports_every_format_and_downloads(
        setup, live_server, page, tmp_path, shot):
    try:
        walk_through(setup, live_server, page, tmp_path, shot)
    finally:
        # The ORM calls above ran while Playwright's loop was running: Django kept their connection
        # in a separate async-context slot; close it here, or it blocks dropping the test database.
        connections.close_all()


def walk_through(setup, live_server, page, tmp_path, shot):
    collection, campaign = setup
    log_in(page, live_server, "carol")
    page.click("nav >> text=Releases")
    page.wait_for_url("**/releases/")
    page.click("text=New release")
    page.wait_for_url("**/releases/new")

    # A first try without a collection: the error is next to the field and the name is kept.
    page.fill("#id_name", "Garden birds v1")
    page.click("button:has-text('Create release')")
    assert page.locator("#id_name").input_value() == "Garden birds v1"
    assert page.locator(".field.has-error:has(#id_collections) .field-error").is_visible()

    page.select_option("#id_collections", [str(collection.pk)])
    page.select_option("#id_vote_campaign_1", str(campaign.pk))
    page.select_option("#id_vote_rule_1", "good_2plus")
    page.select_option("#id_vote_use_1", "verify")
    page.fill("#id_split_train", "0.6")
    page.fill("#id_split_val", "0.2")
    page.fill("#id_split_test", "0.2")
    page.fill("#id_seed", "11")
    page.check("#id_test_human_verified")
    assert page.locator("#id_freeze").is_checked()
    shot(page, "create")
    page.click("button:has-text('Create release')")
    release = Release.objects.get(name="Garden birds v1")
    page.wait_for_url(f"**/releases/{release.pk}/")

    # Frozen (eager Celery): status, counts per split, the card and the items.
    release.refresh_from_db()
    assert release.status == Release.Status.FROZEN, release.error
    assert page.locator("#release-progress [data-role=status]").inner_text() == "Frozen"
    assert page.locator("svg.counts-chart .split-row").count() == 3
    counts = {split: int(page.locator(f'.counts-table tr[data-split="{split}"] [data-role=captions]').inner_text())
              for split in ("train", "val", "test")}
    assert sum(counts.values()) == release.items_total == 20 and counts["test"] > 0
    assert counts == {s: release.counts[s]["captions"] for s in counts}
    assert release.items.filter(split="test", human_verified=False).count() == 0
    card = page.locator("#release-card .markdown")
    assert card.locator("h1").count() == 1 and card.locator("table").count() >= 1
    assert page.locator("[data-role=content-hash]").inner_text() == release.content_hash
    page.locator("#release-items details.provenance >> nth=0").click()
    assert '"lineage"' in page.locator("#release-items details.provenance pre >> nth=0").inner_text()
    shot(page, "detail")

    # Every format, from its own form (htmx swaps the table in).
    for fmt in FORMATS:
        form = page.locator(f'form.export-form[data-format="{fmt}"]')
        if fmt == "webdataset":
            form.locator("input[name=samples_per_shard]").fill("4")
        form.locator("button:has-text('Export')").click()
        page.locator(f'#release-exports tr[data-format="{fmt}"][data-status="done"]').wait_for()
    exports = {e.format: e for e in ReleaseExport.objects.filter(release=release)}
    assert sorted(exports) == sorted(FORMATS)
    assert all(e.status == ReleaseExport.Status.DONE for e in exports.values())
    assert len(exports["webdataset"].files) == 4  # 10 images, 4 per shard, and the export manifest
    assert page.locator("#release-exports a.download").count() == sum(len(e.files) for e in exports.values())
    shot(page, "exports")

    # Download the Parquet file through the permission-checked link.
    parquet = exports["parquet"]
    entry = next(f for f in parquet.files if f["name"].endswith(".parquet"))
    with page.expect_download() as info:
        page.locator(f'#release-exports tr[data-export="{parquet.pk}"] a.download:has-text(".parquet")').click()
    download = info.value
    saved = tmp_path / download.suggested_filename
    download.save_as(saved)
    assert hashlib.sha256(saved.read_bytes()).hexdigest() == entry["sha256"]

    # Re-export and verify: the files are written again and every sha256 matches.
    page.locator(f'#release-exports tr[data-export="{parquet.pk}"] button[data-action=verify]').click()
    page.locator(f'#release-exports tr[data-export="{parquet.pk}"] [data-verify=ok]').wait_for()
    parquet.refresh_from_db()
    assert parquet.verification["ok"] and parquet.verification["matched"] == len(parquet.files)

    import pyarrow.parquet as pq

    table = pq.read_table(saved)
    assert table.num_rows == release.items_total
    assert sorted(set(table.column("split").to_pylist())) == ["test", "train", "val"]
