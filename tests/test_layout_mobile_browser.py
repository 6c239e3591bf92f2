"""Three layout defects of issue 24, checked in a real browser (Debian chromium through Playwright).

Alice (curator) reads a run's funnel on her phone: the page does not scroll sideways and the chart
fits its card. Carol (admin) opens a release with long export file names on her phone: every
download link stays inside the page and its card, and its full name is still there to read. Alice
reviews a step with many decisions at a laptop's 1,366 x 768, at 1,024 px (where the top bar's links
wrap onto a second row, the case that hid the bar) and on a phone: once she scrolls, the sticky
bulk-action bar sits below the sticky top bar instead of sliding under it, with and without review.js.

Screenshots go under the test's tmp_path (the ``shot`` fixture of conftest.py).
"""
import os

import pytest
from django.contrib.auth.models import Group
from django.db import connections

from captionlab import roles

from .curation.test_release_services import export_now, frozen_release
from .curation.test_release_services import make_collection as make_release_collection
from .test_browser import CHROMIUM, log_in
from .test_pipeline_pages import WORDS, make_collection, make_run

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # see test_browser.py

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium "
                       "(apt-get install chromium) to run the browser tests"),
]

PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1366, "height": 768}
SMALL_LAPTOP = {"width": 1024, "height": 700}  # the top bar's links wrap onto a second row


@pytest.fixture(autouse=True)
def body_connection_closed(page):
    """Close the connection the test's body opened while Playwright's loop ran (see test_browser.py)."""
    yield
    connections.close_all()


def page_width(page) -> dict:
    return page.evaluate("() => ({scroll: document.documentElement.scrollWidth, inner: window.innerWidth})")


def assert_no_sideways_scroll(page):
    width = page_width(page)
    assert width["scroll"] <= width["inner"], f"the page scrolls sideways: {width}; widest: {widest(page)}"


def widest(page) -> list[str]:
    """The elements that reach past the window's right edge, outermost first (for the message)."""
    return page.evaluate("""() => [...document.querySelectorAll('body *')]
        .filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5)
        .filter(e => !e.parentElement || e.parentElement.getBoundingClientRect().right <= window.innerWidth + 0.5)
        .slice(0, 8).map(e => `${e.tagName.toLowerCase()}.${[...e.classList].join('.')}#${e.id}`
                              + ` right=${Math.round(e.getBoundingClientRect().right)}`)""")


def box(locator) -> dict:
    b = locator.bounding_box()
    assert b is not None, f"{locator} is not rendered"
    return {**b, "right": b["x"] + b["width"], "bottom": b["y"] + b["height"]}


def assert_inside(inner: dict, outer: dict, what: str):
    assert inner["x"] >= outer["x"] - 0.5 and inner["right"] <= outer["right"] + 0.5, \
        f"{what} sticks out of its container: {inner} not inside {outer}"


# --- 1. The funnel chart on a phone --------------------------------------------------------------------


@pytest.fixture
def finished_run(transactional_db, curator):
    return make_run(make_collection(), user=curator, name="phone funnel")


def test_a_curator_reads_the_funnel_on_a_phone_without_scrolling_sideways(finished_run, live_server, page, shot):
    run = finished_run
    log_in(page, live_server, "alice")
    page.set_viewport_size(PHONE)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    bars = page.locator(".funnel-card [data-role=funnel-bars]")
    assert bars.is_visible()
    shot(page, "phone-run")
    shot(page.locator(".funnel-card"), "phone-funnel-card")
    assert_no_sideways_scroll(page)
    card = box(page.locator(".funnel-card"))
    # The wide SVG (its text would shrink to a third of its size) gives way to bars across the card.
    assert not page.locator("svg.funnel-chart").is_visible()
    rows = bars.locator(".funnel-bar")
    assert rows.count() == 4
    for i in range(rows.count()):
        assert_inside(box(rows.nth(i)), card, f"funnel row {i + 1}")
        assert_inside(box(rows.nth(i).locator(".funnel-bar-track")), card, f"funnel bar {i + 1}")
    label = rows.nth(0).locator(".funnel-bar-label")
    assert float(label.evaluate("e => parseFloat(getComputedStyle(e).fontSize)")) >= 12
    # The bars keep the SVG's proportions: the word count kept 4 of the 7 captions that started.
    words = bars.locator(f'.funnel-bar[data-step="{WORDS}"]')
    track, kept = box(words.locator(".funnel-bar-track")), box(words.locator(".seg-kept"))
    assert kept["width"] / track["width"] == pytest.approx(4 / 7, abs=0.01)
    assert "−3" in words.locator(".funnel-bar-value").inner_text()
    # And each bar still leads to its step's decisions.
    words.locator("a").click()
    page.wait_for_url(f"**/runs/{run.pk}/steps/{WORDS}/")

    # On a laptop the SVG chart is back and the phone bars are hidden.
    page.set_viewport_size(LAPTOP)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    assert page.locator("svg.funnel-chart").is_visible() and not bars.is_visible()
    assert_inside(box(page.locator("svg.funnel-chart")), box(page.locator(".funnel-card")), "the funnel chart")
    assert_no_sideways_scroll(page)


# --- 2. A release's download links on a phone ------------------------------------------------------------


LONG_NAME = "Garden birds of the northern lowland hedgerows photographed through a whole breeding season v12"


@pytest.fixture
def release_with_exports(transactional_db, django_user_model, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    carol = django_user_model.objects.create_user(username="carol", password="carol-pw-123")
    carol.groups.add(Group.objects.get_or_create(name=roles.ADMIN)[0])
    release = frozen_release(make_release_collection("Hedgerow birds", n_images=6), name=LONG_NAME)
    exports = [export_now(release, fmt, options) for fmt, options in
               (("coco", {}), ("webdataset", {"samples_per_shard": 2}), ("csv", {"images": "none"}))]
    # One name longer than a phone is wide, one word without a break (the layout must hold for any
    # name; the link itself is not followed here).
    coco = exports[0]
    coco.files = coco.files + [{**coco.files[-1], "name": "release-1-images-" + "hedgerow_birds_breeding_season_" * 3 + "000017.tar"}]
    coco.save(update_fields=["files"])
    return release, exports


def test_an_admin_sees_every_download_link_of_a_release_inside_the_page_on_a_phone(
        release_with_exports, live_server, page, shot):
    release, exports = release_with_exports
    names = [f["name"] for e in exports for f in e.files]
    assert max(len(n) for n in names) >= 100, names
    log_in(page, live_server, "carol")
    page.set_viewport_size(PHONE)
    page.goto(f"{live_server.url}/releases/{release.pk}/")
    links = page.locator("#release-exports a.download")
    assert links.count() == len(names)
    page.locator("#release-exports").scroll_into_view_if_needed()
    shot(page, "phone-release")
    shot(page.locator("#release-exports"), "phone-exports")
    assert_no_sideways_scroll(page)
    card = box(page.locator("#release-exports"))
    viewport = {"x": 0, "right": PHONE["width"]}
    for i in range(links.count()):
        link = links.nth(i)
        # The full name stays available: as the link's title, and as its text, wrapped but whole.
        full = link.get_attribute("title")
        assert full in names and link.inner_text().replace("\n", "") == full, (full, link.inner_text())
        b = box(link)
        assert_inside(b, card, f"download link {full!r}")
        assert_inside(b, viewport, f"download link {full!r}")
        assert not link.evaluate("a => a.scrollWidth > a.clientWidth + 1"), f"{full!r} is cut off"
    longest = links.filter(has_text="000017.tar")
    assert box(longest)["height"] > 2 * box(links.first)["height"], "the long name did not wrap"

    # On a laptop the table keeps its columns, and the long name wraps inside its own.
    page.set_viewport_size(LAPTOP)
    assert page.locator("#release-exports thead").is_visible()
    assert_no_sideways_scroll(page)
    assert_inside(box(longest), box(page.locator("#release-exports")), "the long download link")


# --- 3. The sticky bulk bar below the sticky top bar -----------------------------------------------------


SHORT = ["dog", "cat", "a bus", "tree", "two cats", "red car", "sea", "a kite", "sun", "bridge"]


@pytest.fixture
def long_step(transactional_db, curator):
    """A run whose word-count step dropped most of 20 short captions: a list long enough to scroll."""
    images = [(300, [SHORT[i % len(SHORT)], f"{SHORT[(i + 3) % len(SHORT)]} {i}"]) for i in range(10)]
    return make_run(make_collection("Short captions", images=images), user=curator, name="long step")


@pytest.mark.parametrize("viewport", [LAPTOP, SMALL_LAPTOP, PHONE], ids=["laptop", "small-laptop", "phone"])
def test_the_sticky_bulk_bar_stays_below_the_sticky_top_bar_when_a_curator_scrolls(
        long_step, viewport, live_server, page, tmp_path):
    run = long_step
    log_in(page, live_server, "alice")
    page.set_viewport_size(viewport)
    page.goto(f"{live_server.url}/runs/{run.pk}/steps/{WORDS}/?tab=drop")
    assert page.locator(".decision").count() >= 12
    bar, topbar = page.locator("#bulk-form"), page.locator("header.topbar")
    start = box(bar)
    # Scroll the list well past the bulk bar's place in the page: it sticks.
    page.evaluate(f"window.scrollTo(0, {start['y']} + 600)")
    page.wait_for_function("() => window.scrollY > 0")
    stuck, top = box(bar), box(topbar)
    name = f"bulk-bar-{viewport['width']}"
    page.screenshot(path=str(tmp_path / f"{name}.png"))  # the window as the curator sees it, not the whole page
    assert stuck["y"] >= top["bottom"] - 0.5, f"the bulk bar slides under the top bar: {stuck} vs {top}"
    assert stuck["y"] <= top["bottom"] + 24, f"the bulk bar did not stick below the top bar: {stuck} vs {top}"
    assert_no_sideways_scroll(page)


@pytest.mark.parametrize("viewport", [LAPTOP, SMALL_LAPTOP], ids=["laptop", "small-laptop"])
def test_without_its_script_the_bulk_bar_still_clears_the_top_bar(long_step, viewport, browser, live_server, tmp_path):
    """The CSS fallbacks alone (review.js not run) keep the bar below the top bar at these widths."""
    context = browser.new_context(viewport=viewport, java_script_enabled=False)
    try:
        page = context.new_page()
        page.set_default_timeout(15_000)
        log_in(page, live_server, "alice")
        page.goto(f"{live_server.url}/runs/{long_step.pk}/steps/{WORDS}/?tab=drop")
        bar, topbar = page.locator("#bulk-form"), page.locator("header.topbar")
        assert page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--topbar-h')") == ""
        page.evaluate(f"window.scrollTo(0, {box(bar)['y']} + 600)")
        stuck, top = box(bar), box(topbar)
        page.screenshot(path=str(tmp_path / f"no-script-{viewport['width']}.png"))
        assert top["bottom"] - 0.5 <= stuck["y"] <= top["bottom"] + 24, (stuck, top)
    finally:
        context.close()
