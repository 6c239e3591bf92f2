"""Semantic duplicates: the packaged sentence encoder (all-MiniLM-L6-v2, real weights) on captions written
here, and image clusters from stored CLIP vectors and the tiny CLIP on the real photos.

The caption set, graded by what a curator would call it:
The step (version 3) checks each candidate pair for negation, numbers, swapped roles and different words before
it calls two captions duplicates, and by default keeps every member of a cluster for the curator's review.

- 60 base captions of everyday photos (dogs, bicycles, food, vehicles, landscapes, animals, music, sport,
  buildings, people, objects), several per topic, so the bases of a topic are one another's distractors;
- 40 planted near-duplicates of them, one edit or two each: case and punctuation ("a brown dog running along
  the beach at sunset"), word order ("In the yard, two dogs play ..."), tense ("... is sleeping ..."),
  synonyms ("bike" for "bicycle", "cook" for "chef", "gulls" for "seagulls", "football" for "soccer"),
  spelling ("colourful"); these must be found (recall >= 75%: the checks refuse a word swap whose encoder
  vectors are below the synonym cut-off, as "foggy" / "misty" at 0.43 and "gulls" / "seagulls" at 0.37, and
  adjectives need 0.85, since their antonyms sit as close) ...
- ... and 25 distractors on the same topics, 5 of them one attribute away from a base ("A white dog runs along
  the beach at sunrise", "A dog sits on a windowsill ..."): a different picture, so never a duplicate
  (precision >= 99% over the pairs put in one cluster).
"""
import hashlib
import itertools

import numpy as np
import pytest

from curation.models import Caption, Collection, FilterDecision, FilterRun, Image
from curation.pipeline.base import DROP, KEEP, NA
from curation.pipeline.executor import PipelineError, validate_steps
from curation.pipeline.semantic_dups import EXACT_LIMIT, SemanticDuplicateImages, SemanticDuplicates, similar_pairs
from pack.embeddings.store import to_bytes
from pack.models import ImageEmbedding

pytestmark = pytest.mark.django_db

PAIRS = [
    ('A brown dog runs along the beach at sunset.', 'a brown dog running along the beach at sunset'),
    ('A black dog sleeps on a wooden porch.', 'A black dog is sleeping on a wooden porch.'),
    ('Two dogs play tug of war with a rope in the yard.', 'In the yard, two dogs play tug of war with a rope.'),
    ('A puppy chews on a red ball in the grass.', 'A puppy chewing on a red ball in the grass.'),
    ('A man rides a bicycle down a busy city street.', 'A man riding a bike down a busy city street.'),
    ('A woman cycles past a row of parked cars.', None),
    ('A cyclist in a yellow jacket climbs a mountain road.', 'A cyclist wearing a yellow jacket climbs a mountain road'),
    ('Children ride scooters in a park on a sunny day.', 'On a sunny day, children ride scooters in a park.'),
    ('A plate of spaghetti with tomato sauce and basil.', 'A plate of spaghetti with basil and tomato sauce.'),
    ('A bowl of ramen with a boiled egg and green onions.', None),
    ('A slice of pepperoni pizza on a paper plate.', 'a slice of pepperoni pizza on a paper plate'),
    ('A chef chops vegetables in a restaurant kitchen.', 'A cook chops vegetables in a restaurant kitchen.'),
    ('A stack of pancakes topped with blueberries and syrup.', None),
    ('A cup of coffee next to an open laptop on a desk.', 'A cup of coffee beside an open laptop on a desk.'),
    ('A red double-decker bus drives over a bridge.', 'A red double decker bus drives across a bridge.'),
    ('A yellow taxi waits at a traffic light at night.', None),
    ('A freight train passes through a snowy forest.', 'A freight train passing through a snowy forest.'),
    ('A small fishing boat is tied to a wooden dock.', 'A small fishing boat tied up at a wooden dock.'),
    ('A sailboat glides across a calm blue lake.', None),
    ('An airplane takes off from a runway at dawn.', 'At dawn, an airplane takes off from a runway.'),
    ('A snow-capped mountain reflected in a still lake.', 'A snow capped mountain reflected in a still lake'),
    ('A waterfall pours into a green pool in the jungle.', None),
    ('Tall pine trees on a foggy hillside in the morning.', 'Tall pine trees on a misty hillside in the morning.'),
    ('Sand dunes under a clear blue sky in the desert.', 'Sand dunes beneath a clear blue sky in the desert.'),
    ('A field of sunflowers in the afternoon light.', None),
    ('Waves crash against rocks on a stormy coast.', 'Waves crashing against the rocks on a stormy coast.'),
    ('A cat sits on a windowsill looking outside.', 'A cat sitting on a windowsill, looking outside.'),
    ('A kitten plays with a ball of yarn on the carpet.', None),
    ('A horse grazes in a fenced meadow.', 'A horse grazing in a fenced meadow.'),
    ('Cows stand in a muddy field near a barn.', None),
    ('A flock of seagulls flies over the harbor.', 'A flock of gulls flies over the harbor.'),
    ('A squirrel eats a nut on a tree branch.', 'On a tree branch, a squirrel eats a nut.'),
    ('An elephant sprays water with its trunk at a river.', None),
    ('A giraffe eats leaves from a tall acacia tree.', 'A giraffe eating leaves from a tall acacia tree.'),
    ('A man plays the guitar on a street corner.', 'A man playing guitar on a street corner.'),
    ('A girl practices the violin in her bedroom.', None),
    ('A crowd cheers at an outdoor rock concert.', 'A crowd cheering at an outdoor rock concert.'),
    ('A drummer performs on a dimly lit stage.', None),
    ('A soccer player kicks the ball toward the goal.', 'A football player kicks the ball toward the goal.'),
    ('A basketball player jumps to dunk the ball.', None),
    ('A surfer rides a large wave in the ocean.', 'A surfer riding a big wave in the ocean.'),
    ('A skier speeds down a snowy slope.', 'A skier races down a snowy slope.'),
    ('A tennis player serves on a clay court.', None),
    ('Runners cross the finish line of a marathon.', 'Runners crossing the finish line of a marathon.'),
    ('An old stone church stands in a small village.', 'An old stone church in a small village.'),
    ('A modern glass skyscraper towers over the street.', None),
    ('A lighthouse on a rocky cliff by the sea.', 'A lighthouse on a rocky cliff beside the sea.'),
    ('A narrow alley with colorful houses and hanging laundry.', 'A narrow alley with colourful houses and laundry hanging.'),
    ('A wooden cabin in the woods covered in snow.', None),
    ('A bridge lit up at night over a wide river.', 'A bridge illuminated at night over a wide river.'),
    ('A woman reads a book on a park bench.', 'A woman reading a book on a park bench.'),
    ('An old man feeds pigeons in a town square.', None),
    ('A family has a picnic on a blanket in the park.', 'A family having a picnic on a blanket in the park.'),
    ('A baby laughs while sitting in a high chair.', None),
    ('Two friends take a selfie in front of a fountain.', 'Two friends taking a selfie in front of a fountain.'),
    ('A student writes notes in a library.', None),
    ('A bouquet of red roses in a glass vase.', 'A bunch of red roses in a glass vase.'),
    ('A laptop, a notebook and a pen on a white desk.', 'A notebook, a laptop and a pen on a white desk.'),
    ('A vintage car parked in front of a diner.', None),
    ('A pair of running shoes on a wooden floor.', 'A pair of running shoes on the wooden floor.'),
]
DISTRACTORS = [
    'A white dog digs a hole on the beach.',
    'A dog swims in a lake to fetch a stick.',
    'A man repairs a flat tire on his bicycle.',
    'A plate of spaghetti and meatballs on a checkered tablecloth.',
    'A slice of chocolate cake on a paper plate.',
    'A blue bus parked at a station.',
    'A rowboat drifts on a calm lake at dusk.',
    'A mountain trail winds through a pine forest.',
    'A cat sleeps on a sofa next to a cushion.',
    'A horse pulls a cart down a country road.',
    'A woman plays the piano in a concert hall.',
    'A goalkeeper dives to save a penalty kick.',
    'A snowboarder jumps off a ramp.',
    'A lighthouse at night with its beam on.',
    'A man reads a newspaper on a train.',
    'A child feeds ducks at a pond.',
    'Red tulips in a field in spring.',
    'A desk with two monitors and a keyboard.',
    'A vintage motorcycle parked on a cobbled street.',
    'A pair of hiking boots covered in mud.',
    'A white dog runs along the beach at sunrise.',
    'A woman rides a bicycle down a quiet country road.',
    'A red double-decker bus parked at a depot.',
    'A dog sits on a windowsill looking outside.',
    'A flock of pigeons flies over the square.',
]


def caption_rows(texts: list[str], name: str = "captions") -> list[dict]:
    """One image and one caption per text (distinct images: the duplicates are in the text alone)."""
    collection = Collection.objects.create(name=name)
    rows = []
    for i, text in enumerate(texts):
        image = Image.objects.create(collection=collection, external_id=f"t{i}", sha256=hashlib.sha256(b"%d" % i).hexdigest())
        caption = Caption.objects.create(image=image, text=text, origin="alt_text")
        rows.append({"caption_id": caption.pk, "image_id": image.pk, "text": text})
    return rows


def same_cluster_pairs(decisions: dict) -> set[frozenset]:
    clusters: dict[int, list[int]] = {}
    for target, decision in decisions.items():
        if "cluster" in decision.details:
            clusters.setdefault(decision.details["cluster"], []).append(target)
    return {frozenset(p) for members in clusters.values() for p in itertools.combinations(sorted(members), 2)}


def test_paraphrases_are_nearer_than_unrelated_captions():
    import pack
    from pack.embeddings import text_vectors

    model = pack.find_model(kind="text")
    vectors = text_vectors(model, ["A man rides a bicycle down a busy city street.",
                                   "A man riding a bike along a busy street in the city.",
                                   "A bowl of ramen with a boiled egg and green onions.",
                                   "A sailboat glides across a calm blue lake."])
    paraphrase = float(vectors[0] @ vectors[1])
    assert paraphrase > 0.8
    assert paraphrase > float(vectors[0] @ vectors[2]) + 0.5 and paraphrase > float(vectors[0] @ vectors[3]) + 0.5


def test_planted_near_duplicate_captions_are_clustered_for_review_with_high_precision():
    bases = [base for base, _ in PAIRS]
    variants = [variant for _, variant in PAIRS if variant]
    assert len(bases) == 60 and len(variants) == 40
    rows = caption_rows(bases + variants + DISTRACTORS)
    id_of = {row["text"]: row["caption_id"] for row in rows}
    planted = {frozenset((id_of[base], id_of[variant])) for base, variant in PAIRS if variant}
    decisions = SemanticDuplicates().decide_run(rows)
    found = same_cluster_pairs(decisions)
    recall = len(found & planted) / len(planted)
    precision = len(found & planted) / len(found)
    assert recall >= 0.75, f"recall {recall:.3f}: missed {[pair for pair in planted - found]}"
    assert precision >= 0.99, f"precision {precision:.3f}: wrong {[pair for pair in found - planted]}"
    assert not [d for d in decisions.values() if d.outcome == DROP]  # the default drops nothing
    review = [d for d in decisions.values() if d.reason == "possible_duplicate"]
    assert len(review) == len(found & planted) and all(d.details["pair"]["score"] >= 0.5 for d in review)
    kept_alone = decisions[id_of[DISTRACTORS[0]]]
    assert (kept_alone.outcome, kept_alone.reason) == (KEEP, "distinct")
    dog, cat = id_of["A dog sits on a windowsill looking outside."], id_of["A cat sits on a windowsill looking outside."]
    checked = [p for c in (dog, cat) for p in decisions[c].details.get("pairs", []) if p["with"] in (dog, cat)]
    assert checked and not checked[0]["same"] and "'cat' / 'dog'" in " ".join(checked[0]["reasons"]).replace(
        "'dog' / 'cat'", "'cat' / 'dog'")
    assert frozenset((dog, cat)) not in found
    dropped = SemanticDuplicates({"action": "drop"}).decide_run(rows)
    assert {d.reason for d in dropped.values() if d.outcome == DROP} == {"semantic_duplicate"}
    assert len([d for d in dropped.values() if d.outcome == DROP]) == len(review)


def test_a_cluster_keeps_its_best_aligned_caption_and_the_details_describe_the_cluster():
    rows = caption_rows(["A cat sits on a windowsill looking outside.", "a cat sitting on a windowsill looking outside",
                         "A cat is sitting on the windowsill, looking outside.", "A bowl of ramen with a boiled egg."])
    ids = [row["caption_id"] for row in rows]
    run = FilterRun.objects.create(collection=Image.objects.get(pk=rows[0]["image_id"]).collection, snapshot=[])
    for row, score in zip(rows[:3], [0.21, 0.33, 0.25]):  # an earlier alignment step's scores
        FilterDecision.objects.create(run=run, step=0, image_id=row["image_id"], caption_id=row["caption_id"],
                                      filter_name="alignment", outcome=KEEP, score=score)
    decisions = SemanticDuplicates({"action": "drop"}).decide_run(rows)
    kept = decisions[ids[1]]
    assert (kept.outcome, kept.reason) == (KEEP, "cluster_kept")
    details = decisions[ids[0]].details
    assert decisions[ids[0]].outcome == DROP
    assert details["cluster"] == min(ids[:3]) and details["size"] == 3 and details["members"] == sorted(ids[:3])
    assert details["kept_id"] == ids[1] and 0.85 <= details["similarity"] < 1
    import pack

    assert details["model"] == pack.find_model(kind="text").key
    assert decisions[ids[3]].reason == "distinct"
    longest = SemanticDuplicates({"keep": "longest", "action": "drop"}).decide_run(rows)
    assert longest[ids[2]].outcome == KEEP and longest[ids[1]].outcome == DROP


def test_duplicate_images_cluster_by_their_clip_vectors_and_the_largest_is_kept(tiny_clip):
    collection = Collection.objects.create(name="image vectors")
    dim = tiny_clip.embedding_dim
    base = np.random.default_rng(0).normal(size=(3, dim)).astype(np.float32)
    vectors = [base[0], base[0] + 0.05 * base[1], base[2]]  # the second: the first, slightly edited
    images = []
    for i, (vector, side) in enumerate(zip(vectors, [300, 600, 400])):
        image = Image.objects.create(collection=collection, external_id=f"v{i}", width=side, height=side,
                                     sha256=hashlib.sha256(b"v%d" % i).hexdigest())
        ImageEmbedding.objects.create(model=tiny_clip, image=image, collection=collection, dim=dim,
                                      vector=to_bytes(vector / np.linalg.norm(vector)))
        images.append(image)
    rows = [{"caption_id": None, "image_id": im.pk, "sha256": im.sha256} for im in images]
    decisions = SemanticDuplicateImages({"min_similarity": 0.95}).decide_run(rows)
    assert decisions[images[1].pk].outcome == KEEP and decisions[images[1].pk].details["kept_id"] == images[1].pk
    assert (decisions[images[0].pk].outcome, decisions[images[0].pk].reason) == (DROP, "semantic_duplicate")
    assert decisions[images[0].pk].details["model"] == tiny_clip.key
    assert decisions[images[2].pk].reason == "distinct"


def test_the_tiny_clip_clusters_real_photos_and_an_undecodable_one_is_not_applicable(tiny_clip, shared_photos):
    from django.core.files.base import ContentFile

    collection = Collection.objects.create(name="real photos")
    paths = sorted(shared_photos.glob("*.jpg"))[:3]
    images = []
    for i, data in enumerate([p.read_bytes() for p in paths] + [paths[0].read_bytes(), b"not an image"]):
        image = Image(collection=collection, external_id=f"r{i}", format="JPEG",
                      sha256=hashlib.sha256(data + b"%d" % i).hexdigest())
        image.file.save(f"r{i}.jpg", ContentFile(data), save=False)
        image.save()
        images.append(image)
    rows = [{"caption_id": None, "image_id": im.pk} for im in images]
    decisions = SemanticDuplicateImages({"min_similarity": 0.999, "keep": "first"}).decide_run(rows)
    assert (decisions[images[3].pk].outcome, decisions[images[3].pk].details["kept_id"]) == (DROP, images[0].pk)
    assert decisions[images[4].pk].outcome == NA and decisions[images[4].pk].reason == "undecodable"
    assert all(decisions[im.pk].details["model"] == tiny_clip.key for im in images)


def test_the_inverted_file_index_finds_the_planted_pairs_of_a_large_set():
    rng = np.random.default_rng(1)
    n, dim = EXACT_LIMIT + 5000, 32
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    twins = rng.choice(n, size=200, replace=False)
    vectors[twins[100:]] = vectors[twins[:100]] + 0.02 * rng.normal(size=(100, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    i, j, _ = similar_pairs(vectors, 0.95)
    found = {frozenset(p) for p in zip(i.tolist(), j.tolist())}
    planted = {frozenset(p) for p in zip(twins[:100].tolist(), twins[100:].tolist())}
    assert len(found & planted) >= 98 and len(found - planted) <= 2


def test_without_a_model_or_with_an_unknown_one_every_item_is_not_applicable(models_dir):
    rows = caption_rows(["a dog", "a dog."], "no model")
    decisions = SemanticDuplicates({"text_model": "no-such-encoder"}).decide_run(rows)
    assert {(d.outcome, d.reason) for d in decisions.values()} == {(NA, "no_model_registered")}
    assert "no-such-encoder" in next(iter(decisions.values())).details["note"]
    images = SemanticDuplicateImages().decide_run([{"caption_id": None, "image_id": rows[0]["image_id"]}])
    assert images[rows[0]["image_id"]].details["note"] == "not run: no model registered"


@pytest.mark.parametrize("name,params", [("semantic_duplicates", {"min_similarity": 1.5}),
                                         ("semantic_duplicates", {"keep": "shortest"}),
                                         ("semantic_duplicate_images", {"min_similarity": 0})])
def test_a_bad_parameter_is_refused_when_the_pipeline_is_saved(name, params):
    with pytest.raises(PipelineError, match=next(iter(params))):
        validate_steps([{"filter": name, "params": params}])
