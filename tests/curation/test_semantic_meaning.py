"""Semantic duplicates that respect meaning (issue 35, item 6): at the defaults, captions with the same words and
another meaning (swapped roles, negations, antonyms, other numbers, other things) are not merged, paraphrases
are clustered for the curator's review, every checked pair says why, and nothing is dropped unless a person
opts in or a calibrated drop_at says so.

The captions are the hand-written development pairs of tests/curation/data/semantic_pairs_dev.tsv (news,
stock, product, sports, social and museum captions) and, written later in other voices with heavier rewording,
semantic_pairs_dev2.tsv (Commons descriptions, listings, forums, press releases, recipes, children's books,
auction lots), each set all in one run, so a pair could also be merged through the other captions around it."""
import csv
import itertools
import re
from pathlib import Path

import numpy as np
import pytest
from django.urls import reverse

from curation import services
from curation.models import Caption, Collection, FilterDecision, FilterRun, Image
from curation.pipeline import meaning, nlp
from curation.pipeline.base import DROP, KEEP
from curation.pipeline.executor import PipelineError, validate_steps
from curation.pipeline.semantic_dups import SemanticDuplicates, nearest

pytestmark = pytest.mark.django_db

DEV = Path(__file__).parent / "data" / "semantic_pairs_dev.tsv"
DEV2 = Path(__file__).parent / "data" / "semantic_pairs_dev2.tsv"
CONTRADICTIONS = ("role_swap", "negation", "antonym", "number", "different_content")


def dev_pairs(path: Path = DEV) -> list[dict]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))


def caption_rows(texts, name="desk"):
    collection = Collection.objects.create(name=name)
    rows = []
    for i, text in enumerate(dict.fromkeys(texts)):
        image = Image.objects.create(collection=collection, external_id=f"c{i}", sha256=f"{i:064x}",
                                     status=Image.Status.READY)
        caption = Caption.objects.create(image=image, text=text, origin=Caption.Origin.ALT_TEXT)
        rows.append({"caption_id": caption.pk, "image_id": image.pk, "text": text})
    return rows


def same_cluster(decisions) -> set[frozenset]:
    members: dict[int, list[int]] = {}
    for cid, decision in decisions.items():
        if "cluster" in decision.details:
            members.setdefault(decision.details["cluster"], []).append(cid)
    return {frozenset(p) for m in members.values() for p in itertools.combinations(m, 2)}


@pytest.fixture(scope="module")
def dev():
    return dev_pairs()


@pytest.fixture
def judged_dev(dev):
    rows = caption_rows([t for p in dev for t in (p["text_a"], p["text_b"])])
    id_of = {row["text"]: row["caption_id"] for row in rows}
    decisions = SemanticDuplicates().decide_run(rows)
    return dev, id_of, decisions


def test_the_development_pairs_are_many_and_of_every_kind(dev):
    kinds = {p["kind"] for p in dev}
    assert len(dev) >= 120
    assert kinds == {"paraphrase", "role_swap", "negation", "antonym", "number", "different_content"}
    assert {p["label"] for p in dev if p["kind"] == "paraphrase"} == {"1"}
    assert {p["label"] for p in dev if p["kind"] != "paraphrase"} == {"0"}


def test_written_role_swaps_negations_and_antonyms_are_not_merged_at_the_defaults(judged_dev):
    dev, id_of, decisions = judged_dev
    merged = same_cluster(decisions)
    for kind in ("role_swap", "negation", "antonym", "number", "different_content"):
        wrong = [(p["text_a"], p["text_b"]) for p in dev if p["kind"] == kind
                 and frozenset((id_of[p["text_a"]], id_of[p["text_b"]])) in merged]
        assert not wrong, f"{kind} pairs merged: {wrong}"


def test_written_paraphrases_are_clustered_for_review_and_nothing_is_dropped(judged_dev):
    dev, id_of, decisions = judged_dev
    merged = same_cluster(decisions)
    paraphrases = [p for p in dev if p["kind"] == "paraphrase"]
    found = [p for p in paraphrases if frozenset((id_of[p["text_a"]], id_of[p["text_b"]])) in merged]
    assert len(found) / len(paraphrases) >= 0.7, f"{len(found)} of {len(paraphrases)} paraphrases clustered"
    assert all(d.outcome == KEEP for d in decisions.values())
    assert {d.reason for d in decisions.values()} == {"distinct", "cluster_kept", "possible_duplicate"}


@pytest.fixture(scope="module")
def dev2():
    return dev_pairs(DEV2)


def test_the_second_development_pairs_are_many_of_every_kind_and_mostly_reworded(dev2):
    assert len(dev2) >= 100
    assert {p["kind"] for p in dev2} == {"paraphrase", "near_topic", *CONTRADICTIONS}
    assert {p["label"] for p in dev2 if p["kind"] == "paraphrase"} == {"1"}
    assert {p["label"] for p in dev2 if p["kind"] != "paraphrase"} == {"0"}
    assert 0.35 <= sum(p["kind"] == "paraphrase" for p in dev2) / len(dev2) <= 0.45


def test_reworded_paraphrases_in_other_voices_are_found_and_their_near_misses_are_not(dev2):
    rows = caption_rows([t for p in dev2 for t in (p["text_a"], p["text_b"])], name="voices")
    id_of = {row["text"]: row["caption_id"] for row in rows}
    merged = same_cluster(SemanticDuplicates().decide_run(rows))
    called = [p for p in dev2 if frozenset((id_of[p["text_a"]], id_of[p["text_b"]])) in merged]
    for kind in CONTRADICTIONS:
        wrong = [(p["text_a"], p["text_b"]) for p in called if p["kind"] == kind]
        assert not wrong, f"{kind} pairs merged: {wrong}"
    right = sum(p["label"] == "1" for p in called)
    paraphrases = sum(p["label"] == "1" for p in dev2)
    assert right / len(called) >= 0.9, f"precision {right}/{len(called)}"
    assert right / paraphrases >= 0.5, f"recall {right}/{paraphrases}"


def test_each_checked_pair_states_its_reasons(judged_dev):
    _, id_of, decisions = judged_dev
    swap = [id_of["A dog chases a cat across the garden."], id_of["A cat chases a dog across the garden."]]
    checked = [p for c in swap for p in decisions[c].details.get("pairs", []) if p["with"] in swap]
    assert checked and not checked[0]["same"] and checked[0]["cosine"] > 0.9
    assert "roles swapped" in " ".join(checked[0]["reasons"]) and checked[0]["features"]["role_swap"] == 1
    negated = [id_of["The shop is open on Sunday morning."], id_of["The shop is not open on Sunday morning."]]
    pair = next(p for c in negated for p in decisions[c].details.get("pairs", []) if p["with"] in negated)
    assert pair["features"]["negation"] == 1 and pair["reasons"][0].startswith("negation")


def test_the_cosine_alone_is_an_opt_in_and_merges_what_the_checks_keep_apart():
    rows = caption_rows(["A dog chases a cat across the garden.", "A cat chases a dog across the garden."])
    assert not same_cluster(SemanticDuplicates().decide_run(rows))
    alone = SemanticDuplicates({"checks": False, "min_similarity": 0.85, "action": "drop"}).decide_run(rows)
    assert len(same_cluster(alone)) == 1 and [d.reason for d in alone.values() if d.outcome == DROP] == [
        "semantic_duplicate"]


def test_a_calibrated_drop_at_drops_only_the_pairs_it_is_sure_of():
    rows = caption_rows(["A dog catches a frisbee in the park.", "In the park a dog catches a frisbee.",
                         "A red kite soaring over farmland in the Chiltern Hills.",
                         "Farmland in the Chilterns with a red kite gliding overhead."])
    decisions = SemanticDuplicates({"drop_at": 0.9}).decide_run(rows)
    dropped = [d for d in decisions.values() if d.outcome == DROP]
    assert len(dropped) == 1 and dropped[0].details["pair"]["score"] >= 0.9
    assert dropped[0].details["kept_id"] in {rows[0]["caption_id"], rows[1]["caption_id"]}
    # the reworded pair (other verbs, "overhead" for "over", the hills' name changed) is the same meaning but
    # not sure enough to drop: clustered for review, both kept
    kite = [decisions[r["caption_id"]] for r in rows[2:]]
    assert all(d.outcome == KEEP for d in kite) and kite[0].details.get("cluster") == kite[1].details.get("cluster")
    assert kite[0].details.get("cluster") is not None


@pytest.mark.parametrize("params", [{"action": "delete"}, {"threshold": 2}, {"drop_at": "high"},
                                    {"weights": {"colour": 1.0}}, {"checks": "yes"}, {"max_candidates": 0}])
def test_a_bad_parameter_is_refused_when_the_pipeline_is_saved(params):
    with pytest.raises(PipelineError, match=next(iter(params))):
        validate_steps([{"filter": "semantic_duplicates", "params": params}])


def test_the_checks_read_passives_participles_and_numbers():
    docs = nlp.parse_unique(["A child is carried by his father.", "A father carries his child.",
                             "A cat chased by a dog", "Two women and a man sit at a table.",
                             "Two men and a woman sit at a table."], meaning.SPACY_NEEDS)
    carried, carries, chased, women, men = (meaning.read(d) for d in docs.values())
    assert ("agent", "carry") in carried.roles["father"] and ("patient", "carry") in carried.roles["child"]
    assert carried.roles["father"] == carries.roles["father"]
    assert ("patient", "chase") in chased.roles["cat"] and ("agent", "chase") in chased.roles["dog"]
    features, reasons = meaning.compare(women, men, {}, 0.8)
    assert features["numbers"] == 1 and "numbers count other things" in " ".join(reasons)


def test_swapped_heads_and_modifiers_and_other_quantifiers_are_differences():
    texts = ["A bar of milk chocolate.", "A bar of chocolate milk.", "All students passed the exam.",
             "Some students passed the exam.", "The opening of the library.", "The library's opening."]
    docs = nlp.parse_unique(texts, meaning.SPACY_NEEDS)
    milk, chocolate, every, some, of_phrase, possessive = (meaning.read(docs[t]) for t in texts)
    features, reasons = meaning.compare(milk, chocolate, {}, 0.8)
    assert features["role_swap"] == 1 and "head and modifier swapped" in reasons[0]
    features, reasons = meaning.compare(every, some, {}, 0.8)
    assert features["numbers"] == 1 and "quantities: all / some" in reasons
    features, _ = meaning.compare(of_phrase, possessive, {}, 0.8)
    assert features == {"negation": 0, "numbers": 0, "role_swap": 0, "substituted": 0, "added": 0}


def test_roles_swapped_through_relatives_possessors_prepositions_and_participles():
    swaps = [("The girl who chased the goose fell over.", "The goose that chased the girl fell over."),
             ("Painting of a horse pulling a cart.", "Painting of a cart pulling a horse."),
             ("A boy on the shoulders of his father.", "A father on the shoulders of his boy."),
             ("The dealer bought the painting from the collector.",
              "The collector bought the painting from the dealer."),
             ("Mice eaten by the owl in the barn.", "The owl eaten by mice in the barn."),
             ("The young man helps an old woman across the road.", "The old man helps a young woman across the road.")]
    same = [("Rice is harvested by farmers in a paddy field.", "Farmers harvest rice in a paddy field."),
            ("The owner of the bakery stacks loaves.", "The bakery's owner stacks loaves."),
            ("Children's rain boots with a yellow duck print.", "Rain boots for children with a print of yellow ducks.")]
    docs = nlp.parse_unique([t for p in swaps + same for t in p], meaning.SPACY_NEEDS)
    for a, b in swaps:
        features, reasons = meaning.compare(meaning.read(docs[a]), meaning.read(docs[b]), {}, 0.8)
        assert features["role_swap"] == 1, (a, b, reasons)
    for a, b in same:
        features, reasons = meaning.compare(meaning.read(docs[a]), meaning.read(docs[b]), {}, 0.8)
        assert features["role_swap"] == 0 and features["substituted"] == 0, (a, b, reasons)
    # across a synonym the encoder knows: the kid and the child are one noun
    texts = ["The kid pushed his teacher into the pond.", "The teacher pushed the child into the pond.",
             "The teacher was pushed into the pond by the child."]
    kid, swapped, passive = (meaning.read(d) for d in nlp.parse_unique(texts, meaning.SPACY_NEEDS).values())
    one = np.array([1.0, 0.0], dtype=np.float32)
    vectors = {"kid": one, "child": one, "teacher": np.array([0.0, 1.0], dtype=np.float32)}
    features, reasons = meaning.compare(kid, swapped, vectors, 0.8)
    assert features["role_swap"] == 1 and "roles swapped" in " ".join(reasons), reasons
    features, reasons = meaning.compare(kid, passive, vectors, 0.8)
    assert features["role_swap"] == 0 and features["substituted"] == 0, reasons


def test_rewording_lowers_the_coverage_and_a_word_in_the_same_place_contradicts():
    texts = ["Protesters gathered outside the embassy on Saturday.",
             "On Saturday, the embassy had demonstrators in front of it.",
             "A cheap flat in the city centre.", "An expensive flat in the city centre.",
             "A pair of porcelain vases decorated with dragons.", "Two porcelain vases with dragon decoration."]
    docs = nlp.parse_unique(texts, meaning.SPACY_NEEDS)
    reworded, other, cheap, dear, pair, two = (meaning.read(docs[t]) for t in texts)
    vectors = {w: v for w, v in zip(["protesters", "demonstrators"], np.eye(2, 4, dtype=np.float32))}
    vectors["demonstrators"] = vectors["protesters"]  # the forms the captions use can match where lemmas do not
    features, reasons = meaning.compare(reworded, other, vectors, 0.8)
    assert features["substituted"] == 0 and features["role_swap"] == 0 and 0 < features["added"] < 0.5, reasons
    assert "synonyms: 'protester' / 'demonstrator'" in " ".join(reasons)
    features, reasons = meaning.compare(cheap, dear, {}, 0.8)
    assert features["substituted"] == 1 and "different word in the same place: 'cheap' / 'expensive'" in reasons[0]
    features, reasons = meaning.compare(pair, two, {}, 0.8)
    assert features["numbers"] == 0 and "related forms: 'decorate' / 'decoration'" in " ".join(reasons), reasons


def test_only_each_captions_nearest_candidates_are_checked():
    i, j = np.array([0, 0, 0, 1, 2]), np.array([1, 2, 3, 2, 3])
    s = np.array([0.9, 0.8, 0.7, 0.95, 0.6], dtype=np.float32)
    kept = set(zip(*[a.tolist() for a in nearest(i, j, s, 1)[:2]]))
    assert kept == {(1, 2), (0, 1), (0, 3)}  # (2, 3) is neither row's best
    assert len(nearest(i, j, s, 3)[0]) == 5


def test_the_cluster_page_shows_clusters_awaiting_review_with_each_pairs_reasons(alice_client, alice):
    rows = caption_rows(["A dog catches a frisbee in the park.", "In the park a dog catches a frisbee.",
                         "A horse pulls a man through the mud.", "A man pulls a horse through the mud."])
    steps = [{"filter": "semantic_duplicates"}]
    pipeline = services.pipeline_save(name="dups", steps=steps, user=alice)
    run = FilterRun.objects.create(collection=Image.objects.get(pk=rows[0]["image_id"]).collection, pipeline=pipeline,
                                   snapshot=validate_steps(steps), status=FilterRun.Status.DONE)
    decisions = SemanticDuplicates().decide_run(rows)
    FilterDecision.objects.bulk_create([
        FilterDecision(run=run, step=0, filter_name="semantic_duplicates", image_id=r["image_id"],
                       caption_id=r["caption_id"], outcome=decisions[r["caption_id"]].outcome,
                       reason=decisions[r["caption_id"]].reason, details=decisions[r["caption_id"]].details)
        for r in rows])
    page = alice_client.get(reverse("run-step-clusters", args=[run.pk, 0])).content.decode()
    assert page.count('class="card cluster ') == 1  # the paraphrases; the swapped roles stay apart
    assert 'data-role="awaiting-review"' in page and 'data-role="pair-reasons"' in page
    assert "same-meaning score" in page
    link = re.search(r'href="([^"]+)" data-role="pairs-campaign"', page)
    assert link and "kind=same_meaning" in link.group(1) and f"run={run.pk}" in link.group(1)


def test_the_benchmark_prints_precision_and_recall_and_refuses_a_file_in_another_format(tmp_path, capsys):
    from benchmarks.semantic_dups import main

    good = tmp_path / "pairs.tsv"
    rows = [p for p in dev_pairs() if p["kind"] in ("paraphrase", "role_swap")][::6]
    good.write_text("label\tkind\ttext_a\ttext_b\n" + "".join(
        f"{p['label']}\t{p['kind']}\t{p['text_a']}\t{p['text_b']}\n" for p in rows), encoding="utf-8")
    assert main(["--pairs", str(good)]) == 0
    out = capsys.readouterr().out
    assert "default step" in out and "cosine >= 0.85" in out and "precision" in out
    bad = tmp_path / "bad.tsv"
    bad.write_text("text\tlabel\nA dog.\t1\n", encoding="utf-8")
    assert main(["--pairs", str(bad)]) == 2
    assert "header must be label, kind, text_a, text_b" in capsys.readouterr().err
    one_class = tmp_path / "one.tsv"
    one_class.write_text("label\tkind\ttext_a\ttext_b\n1\tparaphrase\tA dog.\tA dog!\n", encoding="utf-8")
    assert main(["--pairs", str(one_class)]) == 2
