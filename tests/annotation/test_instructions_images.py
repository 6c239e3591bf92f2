"""Campaign instructions cannot load images from another host (issue 25): a tracking pixel in the
Markdown reaches the annotator's work page as a link, never as an <img>, and the page's policy allows
images from the platform only."""
import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

PIXEL = "https://tracker.example.org/pixel.gif"


def test_an_instructions_image_from_another_host_does_not_appear_on_the_work_page(make_campaign, bob, bob_client):
    campaign = make_campaign("fluency", members=[bob], instructions=f"Read this.\n\n![logo](/static/logo.png) ![x]({PIXEL})")
    response = bob_client.get(reverse("annotate", args=[campaign.pk]))
    html = response.content.decode()
    assert response.status_code == 200 and "Read this." in html
    assert f'<img src="{PIXEL}"' not in html and f'href="{PIXEL}"' in html
    assert '<img src="/static/logo.png" alt="logo">' in html
    img_src = next(p for p in response["Content-Security-Policy"].split(";") if p.strip().startswith("img-src"))
    assert "tracker.example.org" not in img_src and "https:" not in img_src.split()
