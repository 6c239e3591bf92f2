"""The seed papers' presets, run by a curator in a real browser (Debian chromium through Playwright).

Issue 3's acceptance: a curator runs the ``conceptual-captions`` preset on the demo collection and
on a folder of real photographs, watches the progress bar, reads the funnel, overrides two
decisions and sees a hypernymized caption next to its raw alt-text with its lineage; the
``ava-captions`` preset does the same on a comment collection. Everything goes through the pages:
the imports are uploads from the New import form, the runs start from the pipeline page. With
REDIS_URL set, the imports and the runs go through real Celery worker threads consuming from Redis.

The funnel is checked against the FilterDecision rows, never against memorised numbers, and the
rules are checked on what the inputs are (camera file names, generic praise, descriptive comments).
"""
import csv
import io
import itertools
import os
import re
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from django.db import connections

from curation import demo
from curation.models import Caption, Collection, FilterDecision, FilterRun, Image, Pipeline, Review
from curation.pipeline import registry
from curation.pipeline.presets import PRESETS

from .test_browser import CHROMIUM, celery_for_the_live_server, log_in, shot
from .test_pipeline_browser import celery_for_filter_tasks, count

# Playwright's sync API runs an event loop in this thread; the ORM calls here are safe (see test_browser).
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium "
                       "(apt-get install chromium) to run the browser tests"),
]

REPO = Path(__file__).resolve().parents[1]
REAL_PHOTOS = REPO.parent / "shared" / "data" / "openimages-cc-by"
RUN_TIMEOUT = 120_000  # ms: the first run of a process loads the spaCy and lingua models
CAMERA_FILE_NAME = re.compile(r"(DSC|IMG)_\d+")

FUNNEL_TABLE = """() => [...document.querySelectorAll('table.funnel-table tr[data-step]')].map(tr => {
  const n = role => parseInt(tr.querySelector(`[data-role=${role}]`).textContent, 10);
  return {step: Number(tr.dataset.step), entered: n('entered'), kept: n('kept'), dropped: n('dropped'), na: n('na')};
})"""
IMAGES_DECODED = ("() => [...document.querySelectorAll('{sel}')].length > 0 && "
                  "[...document.querySelectorAll('{sel}')].every(i => i.complete && i.naturalWidth > 0)")


# --- Helpers ---------------------------------------------------------------------------------------

@pytest.fixture
def body_connection_closed(page):
    """Closes the database connection the test's body opened, before the browser stops: while
    Playwright's loop runs, Django keeps it in an async-context slot that no later teardown sees,
    and the test database could not be dropped at the end of the session."""
    yield
    connections.close_all()


def db_funnel(run: FilterRun) -> list[dict]:
    """The funnel as the FilterDecision rows say it, overrides counting as the final word."""
    counts = [Counter() for _ in run.snapshot]
    for step, outcome, override in FilterDecision.objects.filter(run=run).values_list("step", "outcome", "override"):
        counts[step][override or outcome] += 1
    return [{"step": i, "entered": sum(c.values()), "kept": c["keep"], "dropped": c["drop"], "na": c["na"]}
            for i, c in enumerate(counts)]


def read_funnel(page, run: FilterRun, *, chained: bool = True) -> list[dict]:
    """The funnel on the run page: a chart bar and a table row per step, counts as in the database.

    ``chained``: before any override, what enters a step is what the step before it let through
    (kept or not applicable), where both steps count the same unit."""
    run.refresh_from_db()
    page.wait_for_selector("svg.funnel-chart")
    assert page.locator("svg.funnel-chart .funnel-row").count() == len(run.snapshot)
    shown = page.evaluate(FUNNEL_TABLE)
    assert shown == db_funnel(run)
    for row in shown:
        assert row["entered"] == row["kept"] + row["dropped"] + row["na"]
    first = run.snapshot[0]["target"]
    if first == "image":
        assert shown[0]["entered"] == run.collection.images.count()
    else:
        assert shown[0]["entered"] == Caption.objects.filter(image__collection=run.collection).exclude(
            origin=Caption.Origin.TRANSFORMED).count()
    if chained:
        for (before, row), (step_before, step) in zip(zip(shown, shown[1:]), zip(run.snapshot, run.snapshot[1:])):
            if step_before["target"] == step["target"]:
                assert row["entered"] == before["kept"] + before["na"], (step_before["filter"], step["filter"])
    return shown


def start_preset_run(page, preset: str, collection: Collection, step_params: dict | None = None) -> FilterRun:
    """Pipelines -> the preset -> choose the collection -> Start run; watch the bar reach 100 %.
    ``step_params`` ({filter: params}) changes steps' parameters as a curator's edit would, before the run."""
    page.click("nav >> text=Pipelines")
    page.get_by_role("link", name=preset, exact=True).click()
    pipeline = Pipeline.objects.get(name=preset)
    page.wait_for_url(f"**/pipelines/{pipeline.pk}/")
    # The preset's steps, as the seed paper orders them, are the editor's steps.
    assert [s["filter"] for s in pipeline.steps] == [s["filter"] for s in PRESETS[preset]["steps"]]
    assert page.locator(".step").count() == len(pipeline.steps)
    if step_params:
        pipeline.steps = [{**s, "params": {**(s.get("params") or {}), **step_params.get(s["filter"], {})}}
                          for s in pipeline.steps]
        pipeline.save(update_fields=["steps"])
    page.select_option("#run-collection", label=collection.name)
    page.click("button:has-text('Start run')")
    # Eager mode runs the whole pipeline inside the request: the redirect waits for it.
    page.wait_for_url("**/runs/*/", timeout=RUN_TIMEOUT)
    run = FilterRun.objects.get(pk=int(re.search(r"/runs/(\d+)/", page.url).group(1)))
    assert (run.pipeline_id, run.collection_id) == (pipeline.pk, collection.pk)
    assert page.locator("#run-progress progress").get_attribute("max") == "100"
    page.wait_for_selector('#run-progress progress[value="100"]', timeout=RUN_TIMEOUT)
    assert page.locator("#run-progress [data-role=percent]").inner_text() == "100%"
    assert page.locator("#run-progress [data-role=status]").inner_text() == "Done"
    # The results load by themselves once the bar says done.
    page.wait_for_selector("svg.funnel-chart", timeout=15_000)
    run.refresh_from_db()
    assert run.status == FilterRun.Status.DONE and run.collection_id == collection.pk
    return run


def step_of(run: FilterRun, name: str) -> int:
    return next(i for i, step in enumerate(run.snapshot) if step["filter"] == name)


def open_step(page, run: FilterRun, step: int) -> None:
    """From the run page, through the step's link in the funnel table."""
    page.click(f'table.funnel-table tr[data-step="{step}"] a')
    page.wait_for_url(f"**/runs/{run.pk}/steps/{step}/")
    page.wait_for_selector("#outcome-tabs")


def final_counts(run: FilterRun, step: int) -> tuple[str, str]:
    row = db_funnel(run)[step]
    return str(row["kept"]), str(row["dropped"])


def upload(page, *, collection: str, kind: str, path: Path) -> Collection:
    """New import -> a new collection, the kind, the file -> Start import; the bar reaches Done."""
    page.click("nav >> text=New import")
    page.fill("input[name=new_collection]", collection)
    page.select_option("select[name=kind]", kind)
    page.set_input_files("input[name=file]", str(path))
    page.click("button:has-text('Start import')")
    page.wait_for_url("**/imports/*/")
    page.wait_for_selector('#import-progress progress[value="100"]', timeout=60_000)
    assert page.locator("#import-progress [data-role=status]").inner_text() == "Done"
    return Collection.objects.get(name=collection)


# --- 1. conceptual-captions on the demo collection -----------------------------------------------

@pytest.fixture
def demo_collection(transactional_db, curator):
    """The demo collection, loaded by the app's own loader (``manage.py demo``), before the browser
    starts. Its import runs inline here (eager), whatever the broker: no worker runs yet."""
    from config.celery import app

    images, _missing = demo.available_images()
    if not images:
        pytest.skip("scikit-image ships none of the demo photographs")
    eager_before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        result = demo.load()
    finally:
        app.conf.task_always_eager = eager_before
    assert result.job.status == "done"
    assert result.collection.images.filter(status=Image.Status.READY).count() == len(images)
    return result.collection


def test_conceptual_captions_on_the_demo_collection_funnel_overrides_and_a_hypernymized_caption_with_lineage(
    demo_collection, live_server, page, body_connection_closed, tmp_path
):
    collection = demo_collection
    with celery_for_filter_tasks() as mode:
        log_in(page, live_server, "alice")
        run = start_preset_run(page, "conceptual-captions", collection)
    funnel = read_funnel(page, run)
    shot(page, tmp_path, f"cc-demo-funnel-{mode}")

    # Override two drops of the first caption step that dropped at least two captions.
    step = next(row["step"] for row in funnel
                if run.snapshot[row["step"]]["target"] == "caption" and row["dropped"] >= 2)
    kept, dropped = funnel[step]["kept"], funnel[step]["dropped"]
    page.locator(f'svg.funnel-chart a[href="/runs/{run.pk}/steps/{step}/"]').click()
    page.wait_for_url(f"**/runs/{run.pk}/steps/{step}/")
    page.wait_for_selector(".decision")
    assert (count(page, "keep"), count(page, "drop")) == (str(kept), str(dropped))
    rows = page.locator(".decision")
    assert rows.count() == min(dropped, 50)
    first_id, second_id = rows.nth(0).get_attribute("id"), rows.nth(1).get_attribute("id")
    # One from the keyboard: j to the first row, n for a note, Escape, a to keep it.
    page.keyboard.press("j")
    assert page.evaluate("document.activeElement.id") == first_id
    page.keyboard.press("n")
    page.keyboard.type("says what is there")
    page.keyboard.press("Escape")
    page.keyboard.press("a")
    page.wait_for_selector(f'#{first_id}[data-final="keep"]')
    assert (count(page, "keep"), count(page, "drop")) == (str(kept + 1), str(dropped - 1))
    # One with the mouse: the Keep button of the second row.
    page.locator(f"#{second_id} button[data-outcome=keep]").click()
    page.wait_for_selector(f'#{second_id}[data-final="keep"]')
    assert (count(page, "keep"), count(page, "drop")) == (str(kept + 2), str(dropped - 2))
    assert "says what is there" in page.locator(f"#{first_id} .review-note").inner_text()
    shot(page, tmp_path, "cc-demo-overrides")
    overridden = FilterDecision.objects.filter(run=run, step=step).exclude(override="")
    assert {f"decision-{d.pk}" for d in overridden} == {first_id, second_id}
    assert {(d.outcome, d.override) for d in overridden} == {("drop", "keep")}
    assert Review.objects.filter(decision__in=overridden, note="says what is there").count() == 1
    # The funnel counts the overrides.
    page.click("a:has-text('Funnel')")
    page.wait_for_url(f"**/runs/{run.pk}/")
    after = read_funnel(page, run, chained=False)
    assert (after[step]["kept"], after[step]["dropped"]) == (kept + 2, dropped - 2)

    # Hypernymization: a caption whose named entity became a hypernym, next to its raw alt-text.
    hyper = step_of(run, "hypernymize")
    changed = [d for d in FilterDecision.objects.filter(run=run, step=hyper).select_related("caption").order_by("pk")
               if (d.details or {}).get("replaced") and d.text_after and d.text_after != d.text_before]
    assert changed, "hypernymization replaced no named entity in the demo collection"
    decision = changed[0]
    raw = decision.caption
    replaced = decision.details["replaced"][0]
    assert replaced["text"] in raw.text and replaced["text"] not in decision.text_after
    assert replaced["hypernym"] in decision.text_after
    open_step(page, run, hyper)
    page.click('#outcome-tabs a[data-tab="keep"]')
    row = page.locator(f"#decision-{decision.pk}")
    row.wait_for()
    assert row.locator(".raw-text").inner_text() == raw.text
    assert replaced["text"] in row.locator(".raw-text del").all_inner_texts()
    assert row.locator(".after-text").inner_text() == decision.text_after
    assert [t.lower() for t in row.locator(".text-label").all_inner_texts()] == ["raw text", "transformed"]
    shot(page, tmp_path, "cc-demo-hypernymize")

    # Its lineage: the transformed caption is a child of the raw one, on the image's page.
    child = Caption.objects.get(image=decision.image_id, origin=Caption.Origin.TRANSFORMED, text=decision.text_after)
    chain = child.lineage()
    assert chain[-1] == raw and chain[0].metadata["step"] == hyper
    row.locator("a.decision-thumb").click()
    page.wait_for_url(f"**/images/{decision.image_id}/")
    card = page.locator(f"#caption-{child.pk}")
    assert card.locator(".caption-text").inner_text() == decision.text_after
    assert "Transformed" in card.locator(".caption-meta").inner_text()
    assert card.locator(".lineage-chain .lineage-text").all_inner_texts() == [c.text for c in chain]
    assert "raw text" in card.locator(".lineage-chain li.raw").inner_text()
    parent_link = card.locator(".lineage-chain a[data-role=parent]")
    assert parent_link.inner_text() == child.parent.text
    # Long credits (a URL) wrap inside the details card: the page does not scroll sideways.
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    shot(page, tmp_path, "cc-demo-lineage")
    parent_link.click()
    page.wait_for_url(f"**/images/{decision.image_id}/#caption-{child.parent_id}")
    parent_card = page.locator(f"#caption-{child.parent_id}")
    assert parent_card.locator(".caption-text").inner_text() == child.parent.text
    assert parent_card.is_visible()
    if child.parent == raw:
        assert "Raw text: this caption has no parent." in parent_card.inner_text()


# --- 2. conceptual-captions on a folder of real photographs -------------------------------------

def zip_of_the_folder(folder: Path, archive: Path) -> dict[str, str]:
    """The folder as a curator uploads it: its photographs and a captions.csv sidecar made from
    credits.csv (the Flickr title is the alt-text). Written under tmp_path, never into the repo.
    Returns the title of each file."""
    titles = {}
    with (folder / "credits.csv").open(encoding="utf-8", newline="") as fh:
        credits = {row["ImageID"]: row for row in csv.DictReader(fh)}
    sidecar = io.StringIO()
    writer = csv.writer(sidecar, lineterminator="\n")
    writer.writerow(["file", "caption", "license", "credit", "source_url"])
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_STORED) as zf:
        for photo in sorted(folder.glob("*.jpg")):
            zf.write(photo, photo.name)
            row = credits[photo.stem]
            titles[photo.name] = row["Title"]
            writer.writerow([photo.name, row["Title"], row["License"], row["Author"], row["OriginalLandingURL"]])
        zf.writestr("captions.csv", sidecar.getvalue())
    return titles


def test_conceptual_captions_on_a_folder_of_real_photographs(
    curator, live_server, page, body_connection_closed, tmp_path
):
    if not REAL_PHOTOS.is_dir():
        pytest.skip(f"the real photographs are not at {REAL_PHOTOS} (../shared is absent)")
    # The import form takes uploads only (a zip of images with a captions CSV, a TSV, COCO JSON or
    # a comment dump); a server folder is a command-line import. So the curator zips the folder.
    titles = zip_of_the_folder(REAL_PHOTOS, tmp_path / "openimages-cc-by.zip")
    photos = len(titles)
    assert photos >= 10
    camera_titles = sorted(t for t in titles.values() if CAMERA_FILE_NAME.fullmatch(t))
    assert {"DSC_2481", "IMG_4663"} <= set(camera_titles)

    with celery_for_the_live_server():
        log_in(page, live_server, "alice")
        collection = upload(page, collection="Open Images CC-BY", kind="images", path=tmp_path / "openimages-cc-by.zip")
        counters = page.locator("#import-progress .counters").inner_text().upper()
        assert f"IMAGES CREATED\n{photos}" in counters and f"CAPTIONS CREATED\n{photos}" in counters
        page.click("text=Open the collection")
    page.wait_for_selector(".image-grid img")
    assert page.locator(".image-grid img").count() == photos
    page.wait_for_function(IMAGES_DECODED.format(sel=".image-grid img"))
    shot(page, tmp_path, "cc-real-collection")

    with celery_for_filter_tasks() as mode:
        run = start_preset_run(page, "conceptual-captions", collection)
    funnel = read_funnel(page, run)
    shot(page, tmp_path, f"cc-real-funnel-{mode}")

    # Every photograph really decodes: the decodable step keeps them all.
    decodable = step_of(run, "decodable")
    decisions = FilterDecision.objects.filter(run=run, step=decodable)
    assert decisions.count() == photos and set(decisions.values_list("outcome", flat=True)) == {"keep"}
    assert (funnel[decodable]["entered"], funnel[decodable]["kept"]) == (photos, photos)
    open_step(page, run, decodable)
    assert (count(page, "keep"), count(page, "drop")) == (str(photos), "0")
    page.click('#outcome-tabs a[data-tab="keep"]')
    page.wait_for_selector(".decision img")
    assert page.locator(".decision").count() == photos
    page.wait_for_function(IMAGES_DECODED.format(sel=".decision img"))
    shot(page, tmp_path, "cc-real-decodable")

    # Camera file names are no captions: the caption-length text filter drops them as too short,
    # and no text step before it had dropped them (nor did a later one see them).
    length = step_of(run, "caption_length")
    for title in camera_titles:
        caption = Caption.objects.get(image__collection=collection, text=title)
        steps = list(FilterDecision.objects.filter(run=run, caption=caption).order_by("step"))
        drops = [d for d in steps if d.outcome == "drop"]
        assert [(d.step, d.reason) for d in drops] == [(length, "too_short")], title
        assert steps[-1].step == length and all(d.outcome == "keep" for d in steps[:-1])
    page.click("a:has-text('Funnel')")
    page.wait_for_url(f"**/runs/{run.pk}/")
    open_step(page, run, length)
    assert (count(page, "keep"), count(page, "drop")) == final_counts(run, length)
    page.click('a[data-reason="too_short"]')
    page.wait_for_url("**reason=too_short**")
    too_short = FilterDecision.objects.filter(run=run, step=length, outcome="drop", reason="too_short")
    assert page.locator(".decision").count() == too_short.count()
    for title in camera_titles:
        row = page.locator(".decision", has=page.locator(".caption-text", has_text=re.compile(f"^{title}$")))
        assert row.count() == 1, title
        assert row.locator("[data-role=reason]").inner_text() == "too_short"
    shot(page, tmp_path, "cc-real-too-short")


# --- 3. ava-captions on a comment collection --------------------------------------------------------

# Comments in the style of the AVA-Captions paper's examples. The statistics are fitted on this
# collection alone: a word's -ln P is at most ln(total count), so with a small corpus a comment needs
# about ten rare noun unigrams and descriptor-object bigrams to pass min_rho = 20, while the praise
# repeats a few nouns (shot, colors, photo) and stays far below it. The corpus is sized for that.
DESCRIPTIVE = (
    "the rusty tractor against the golden wheat field is lovely, and the low evening sun picks out every furrow",
    "I love the composition of the old barn and the cloudy sky, with the wooden fence leading in from the corner",
    "The reflection of the red lighthouse in the calm harbour water works beautifully",
    "The soft morning fog behind the pine trees gives the valley a quiet mood",
    "The shallow depth of field isolates the dragonfly wing from the green leaves",
    "The long exposure turns the waterfall into silky white streaks over the mossy rocks",
)
# Informative by the numbers, yet self-promotion: the curator overrides the filter on these two.
PROMOTION = (
    "Visit my gallery for more prints of the harbour lighthouse and fishing boats at sunset",
    "See my portfolio website for large canvas prints of misty mountain lakes and frozen forest trails",
)
GENERIC = (  # five words or more: they reach the informativeness step
    "Nice shot, I really like it.", "Great colors, I like this shot.", "Very nice shot, well done!",
    "Great shot, love the colors.", "Nice colors and a great shot.", "Great photo, very nice colors.",
    "Nice photo, I like it a lot.", "Love this shot, great colors!", "Very nice photo, good shot.",
)
SHORT = ("Nice shot!", "Great colors", "Great shot!", "Nice photo")  # under five words: cleaned away
SITE = "Congrats on the ribbon, well deserved!"  # site words: cleaned away
LONELY = "954025"  # an image with praise only: left without a kept comment
LONELY_PRAISE = "Very nice photo, good shot, well done."


def comment_dump(path: Path) -> list[tuple[str, str]]:
    """image id <TAB> comment, one a line (the comment dump the import form takes)."""
    praise = itertools.cycle(GENERIC)
    rows = []
    for i, comment in enumerate(DESCRIPTIVE + PROMOTION):
        image = str(953600 + i)
        rows += [(image, text) for text in SHORT] + [(image, comment)] + [(image, next(praise)) for _ in range(6)]
    rows += [(LONELY, "Nice shot!"), (LONELY, "Great colors"), (LONELY, SITE), (LONELY, LONELY_PRAISE)]
    path.write_text("".join(f"{image}\t{text}\n" for image, text in rows), encoding="utf-8")
    return rows


def test_ava_captions_on_a_comment_collection(
    curator, live_server, page, body_connection_closed, tmp_path
):
    rows = comment_dump(tmp_path / "ava-comments.txt")
    images = {image for image, _ in rows}
    with celery_for_the_live_server():
        log_in(page, live_server, "alice")
        collection = upload(page, collection="AVA comments", kind="comments", path=tmp_path / "ava-comments.txt")
        counters = page.locator("#import-progress .counters").inner_text().upper()
        assert f"CAPTIONS CREATED\n{len(rows)}" in counters and f"IMAGES CREATED\n{len(images)}" in counters
    assert Caption.objects.filter(image__collection=collection, origin=Caption.Origin.WEB_COMMENT).count() == len(rows)

    with celery_for_filter_tasks() as mode:
        # This collection is 86% praise. The default cut keeps the top 45% of a collection's comments (the
        # share the paper kept on AVA), which here would keep some praise; the paper's absolute rho >= 20
        # separates this small corpus, and the page is followed with it.
        run = start_preset_run(page, "ava-captions", collection,
                               step_params={"informativeness": {"min_rho_percentile": None, "min_rho": 20.0}})
    funnel = read_funnel(page, run)
    shot(page, tmp_path, f"ava-funnel-{mode}")

    clean, informative, lonely = (step_of(run, name) for name in
                                  ("comment_clean", "informativeness", "images_without_comments"))

    def decisions(step):
        return list(FilterDecision.objects.filter(run=run, step=step).select_related("caption", "image"))

    # Cleaning: the short praise and the site words go, the rest reach the informativeness step.
    for d in decisions(clean):
        if d.caption.text in SHORT:
            assert (d.outcome, d.reason) == ("drop", "too_short"), d.caption.text
        elif d.caption.text == SITE:
            assert (d.outcome, d.reason) == ("drop", "site_words")
        else:
            assert d.outcome == "keep", d.caption.text

    # Informativeness: generic praise below min_rho, every descriptive comment between the bounds,
    # and every descriptive comment scores above every piece of praise.
    params = {**registry.get("informativeness").defaults, **(run.snapshot[informative].get("params") or {})}
    scored = decisions(informative)
    praise = [d for d in scored if d.caption.text in GENERIC + (LONELY_PRAISE,)]
    described = [d for d in scored if d.caption.text in DESCRIPTIVE + PROMOTION]
    assert len(praise) + len(described) == len(scored) == funnel[informative]["entered"]
    assert len(described) == len(DESCRIPTIVE + PROMOTION)
    # The cut used: the preset's min_rho, or (by default) the percentile of the fitted corpus, recorded on
    # every decision as min_rho_used.
    cut = params["min_rho"]
    if cut is None:
        cut = next(d.details["min_rho_used"] for d in scored if d.details.get("min_rho_used") is not None)
    upper = params["max_rho"] if params["max_rho"] is not None else float("inf")
    for d in praise:
        assert (d.outcome, d.reason) == ("drop", "uninformative") and d.score < cut, d.caption.text
    for d in described:
        assert d.outcome == "keep" and cut <= d.score <= upper, (d.caption.text, d.score)
    assert max(d.score for d in praise) < min(d.score for d in described)

    # The image whose comments all went is dropped; every other image keeps its descriptive comment.
    for d in decisions(lonely):
        expected = ("drop", "no_kept_comment") if d.image.external_id == LONELY else ("keep", "")
        assert (d.outcome, d.reason) == expected, d.image.external_id
    assert len(decisions(lonely)) == len(images)

    # The informativeness step in the browser: the counts, the scores, then two overrides.
    page.locator(f'svg.funnel-chart a[href="/runs/{run.pk}/steps/{informative}/"]').click()
    page.wait_for_url(f"**/runs/{run.pk}/steps/{informative}/")
    page.wait_for_selector(".decision")
    kept, dropped = funnel[informative]["kept"], funnel[informative]["dropped"]
    assert (count(page, "keep"), count(page, "drop")) == (str(kept), str(dropped))
    assert page.locator('a[data-reason="uninformative"] .count').inner_text() == str(len(praise))
    shot(page, tmp_path, "ava-informativeness-dropped")
    page.click('#outcome-tabs a[data-tab="keep"]')
    page.wait_for_selector('#outcome-tabs a[data-tab="keep"][aria-current="page"]')
    page.wait_for_selector(".decision")
    shown = sorted(page.locator(".decision .caption-text").all_inner_texts())
    assert shown == sorted(DESCRIPTIVE + PROMOTION)
    by_text = {d.caption.text: d for d in described}
    for text in DESCRIPTIVE[:2]:
        score = page.locator(f"#decision-{by_text[text].pk} [data-role=score]").inner_text()
        assert float(score) == pytest.approx(by_text[text].score, abs=1e-3)

    # From the keyboard: focus the first promotion, n for a note, Escape, x to drop it.
    first, second = (by_text[text] for text in PROMOTION)
    page.locator(f"#decision-{first.pk}").focus()
    page.keyboard.press("n")
    page.keyboard.type("self-promotion, not a description")
    page.keyboard.press("Escape")
    assert page.evaluate("document.activeElement.id") == f"decision-{first.pk}"
    page.keyboard.press("x")
    page.wait_for_selector(f'#decision-{first.pk}[data-final="drop"]')
    assert (count(page, "keep"), count(page, "drop")) == (str(kept - 1), str(dropped + 1))
    # With the mouse: the Drop button of the second.
    page.locator(f"#decision-{second.pk} button[data-outcome=drop]").click()
    page.wait_for_selector(f'#decision-{second.pk}[data-final="drop"]')
    assert (count(page, "keep"), count(page, "drop")) == (str(kept - 2), str(dropped + 2))
    shot(page, tmp_path, "ava-overrides")
    overridden = FilterDecision.objects.filter(run=run, step=informative).exclude(override="")
    assert {(d.pk, d.outcome, d.override) for d in overridden} == {
        (first.pk, "keep", "drop"), (second.pk, "keep", "drop")}
    assert Review.objects.get(decision=first).note == "self-promotion, not a description"
    page.click("a:has-text('Funnel')")
    page.wait_for_url(f"**/runs/{run.pk}/")
    after = read_funnel(page, run, chained=False)
    assert (after[informative]["kept"], after[informative]["dropped"]) == (kept - 2, dropped + 2)

    # The image left without comments, on its step's page.
    open_step(page, run, lonely)
    assert (count(page, "keep"), count(page, "drop")) == (str(len(images) - 1), "1")
    row = page.locator(".decision")
    assert row.count() == 1
    assert LONELY in row.locator(".caption-text").inner_text()
    assert row.locator("[data-role=reason]").inner_text() == "no_kept_comment"
    shot(page, tmp_path, "ava-images-without-comments")
