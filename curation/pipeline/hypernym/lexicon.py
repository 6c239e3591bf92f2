"""The word lists hypernymization looks things up in: hypernyms by entity label, head words that make a
name an instance of a kind, prepositions of place, units, time words, countries and US states, the
punctuation classes the rewrite tidies around, and English plurals and articles."""
from __future__ import annotations

# Hypernyms by spaCy entity label; "GPE:country" and "GPE:state" refine GPE for known names.
# An empty string drops the entity; a label absent from the mapping leaves its entities as written.
HYPERNYMS = {
    "PERSON": "person", "NORP": "people", "NORP:singular": "person", "FAC": "building", "ORG": "organization", "GPE": "city",
    "GPE:country": "country", "GPE:state": "state", "LOC": "location", "PRODUCT": "product",
    "EVENT": "event", "WORK_OF_ART": "artwork", "LAW": "law", "LANGUAGE": "language",
}
NAME_LABELS = frozenset(label.split(":")[0] for label in HYPERNYMS)

# A name whose head is one of these words is an instance of it: "Taj Mahal Hotel" is a hotel,
# "American Film Festival" a festival. The value is the entity type it counts as.
HEAD_WORDS = {
    **dict.fromkeys(["festival", "awards", "award", "ceremony", "premiere", "concert", "gala", "parade",
                     "marathon", "championship", "championships", "cup", "tournament", "games", "olympics",
                     "conference", "summit", "fair", "exhibition", "expo", "show", "carnival", "rally",
                     "race", "grand prix", "open"], "EVENT"),
    **dict.fromkeys(["hotel", "centre", "center", "stadium", "arena", "airport", "station", "museum", "gallery",
                     "hall", "theatre", "theater", "church", "cathedral", "temple", "mosque", "palace", "castle",
                     "tower", "bridge", "square", "street", "road", "avenue", "park", "garden", "gardens", "zoo",
                     "market", "mall", "library", "hospital", "building", "plaza", "pier", "harbour", "harbor",
                     "monument", "memorial", "abbey", "chapel", "restaurant", "office", "basilica", "court", "factory",
                     "plant", "port", "lighthouse", "gate", "fountain", "statue"], "FAC"),
    **dict.fromkeys(["river", "lake", "mountain", "mountains", "beach", "island", "islands", "bay", "sea",
                     "ocean", "valley", "canyon", "forest", "desert", "coast", "falls", "glacier", "hill",
                     "hills"], "LOC"),
    **dict.fromkeys(["university", "college", "school", "company", "band", "team", "club", "orchestra",
                     "choir"], "ORG"),
}

# A name that starts with one of these words is an instance of it: "River Seine", "Lake Como", "Mount Rainier".
PREFIX_HEADS = {"river": "river", "lake": "lake", "mount": "mountain", "mt": "mountain", "loch": "lake",
                "isle": "island", "cape": "cape", "port": "port", "fort": "fort", "lago": "lake", "rio": "river"}

# Dependencies of a name that hangs loosely on the sentence after a comma (an afterthought, not an argument).
LOOSE_DEPS = frozenset(["appos", "npadvmod", "conj", "dep", "ROOT", "nmod", "advmod"])
NAMING_VERBS = frozenset(["name", "call", "nickname", "dub", "christen", "title", "label"])

LOCATION_PREPOSITIONS = ["in", "at", "near", "from", "outside", "inside", "around", "across", "on", "over",
                         "above", "below", "under", "along", "within", "throughout", "through", "into", "onto",
                         "off", "toward", "towards", "beside", "behind", "via", "to", "between", "opposite"]

UNITS = ["km", "kilometer", "kilometre", "mile", "meter", "metre", "cm", "mm", "inch", "foot", "feet", "ft",
         "yard", "kg", "kilogram", "gram", "g", "lb", "lbs", "pound", "ounce", "oz", "ton", "tonne", "liter",
         "litre", "ml", "gallon", "mph", "kph", "%", "percent", "degree", "megapixel", "mp", "gb", "tb", "mb",
         "hp", "cc", "carat", "acre", "hectare", "storey", "story", "year", "month", "week", "day", "hour",
         "minute", "second", "piece"]

# DATE/TIME entities made only of these words say what the picture shows ("at night",
# "in winter") and stay; the others (numbers, month names, "last year") are dates and go.
KEPT_TIME_WORDS = ["night", "morning", "evening", "afternoon", "dusk", "dawn", "sunset", "sunrise", "noon",
                   "midnight", "daytime", "nighttime", "twilight", "spring", "summer", "autumn", "fall",
                   "winter", "the", "a", "an", "at", "early", "late", "sunny", "day", "days", "nights"]

HONORIFICS = frozenset(["mr", "mrs", "ms", "miss", "dr", "sir", "lady", "lord", "dame", "prof", "rev", "hon",
                        "saint", "st", "mx", "madam", "mister"])

COUNTRIES = frozenset("""afghanistan albania algeria andorra angola argentina armenia australia austria azerbaijan
bahamas bahrain bangladesh barbados belarus belgium belize benin bhutan bolivia bosnia botswana brazil brunei
bulgaria burundi cambodia cameroon canada chad chile china colombia comoros congo croatia cuba cyprus czechia
denmark djibouti dominica ecuador egypt eritrea estonia eswatini ethiopia fiji finland france gabon gambia
georgia germany ghana greece grenada guatemala guinea guyana haiti honduras hungary iceland india indonesia iran
iraq ireland israel italy jamaica japan jordan kazakhstan kenya kiribati kosovo kuwait kyrgyzstan laos latvia
lebanon lesotho liberia libya liechtenstein lithuania luxembourg madagascar malawi malaysia maldives mali malta
mauritania mauritius mexico micronesia moldova monaco mongolia montenegro morocco mozambique myanmar namibia
nauru nepal netherlands nicaragua niger nigeria norway oman pakistan palau palestine panama paraguay peru
philippines poland portugal qatar romania russia rwanda samoa senegal serbia seychelles singapore slovakia
slovenia somalia spain sudan suriname sweden switzerland syria taiwan tajikistan tanzania thailand togo tonga
tunisia turkey turkmenistan tuvalu uganda ukraine uruguay uzbekistan vanuatu venezuela vietnam yemen zambia
zimbabwe uk usa us america britain england scotland wales""".split()) | {
    "united kingdom", "united states", "united states of america", "great britain", "new zealand",
    "south africa", "south korea", "north korea", "saudi arabia", "sri lanka", "costa rica", "el salvador",
    "czech republic", "dominican republic", "united arab emirates", "the netherlands", "the uk", "the us",
    "the usa", "the united states", "the united kingdom", "ivory coast", "puerto rico", "hong kong",
    "northern ireland", "u.s.", "u.k.", "the u.s.", "vatican city", "east timor", "papua new guinea",
}
US_STATES = frozenset("""alabama alaska arizona arkansas california colorado connecticut delaware florida hawaii
idaho illinois indiana iowa kansas kentucky louisiana maine maryland massachusetts michigan minnesota
mississippi missouri montana nebraska nevada ohio oklahoma oregon pennsylvania tennessee texas utah vermont
virginia washington wisconsin wyoming""".split()) | {
    "new hampshire", "new jersey", "new mexico", "north carolina", "north dakota", "rhode island",
    "south carolina", "south dakota", "west virginia",
}

QUOTES = frozenset(["'", '"', "`", "``", "''", "\u2018", "\u2019", "\u201c", "\u201d"])
OPENING = frozenset(["(", "[", "{"])
CLOSING = frozenset([")", "]", "}", ",", ".", ";", ":", "!", "?", "%"])
COMMA_LIKE = frozenset([",", ";", ":", "-", "\u2013", "\u2014", "--", "|", "/"])
FINAL = frozenset([".", "!", "?"])
MODIFIER_DEPS = frozenset(["compound", "amod", "nmod", "nummod", "npadvmod", "quantmod"])
NUMERIC_ENTS = frozenset(["CARDINAL", "QUANTITY", "PERCENT", "MONEY"])
TITLE_FUNCTION_WORDS = frozenset(["the", "a", "an", "of", "and", "in", "on", "to", "for", "at", "with", "from", "'s", "s"])
CONTENT_POS = frozenset(["NOUN", "VERB", "ADJ", "ADV"])
ARGUMENT_DEPS = frozenset(["nsubj", "nsubjpass", "dobj", "pobj", "ROOT", "attr", "dative", "oprd"])
IRREGULAR_PLURALS = {"person": "people", "man": "men", "woman": "women", "child": "children",
                     "people": "people", "foot": "feet", "mouse": "mice", "goose": "geese"}
TIME_UNITS = frozenset(["year", "years", "month", "months", "week", "weeks", "decade", "decades", "century",
                        "centuries", "hour", "hours", "minute", "minutes", "second", "seconds", "weekend"])
DEICTIC_TIME = frozenset(["today", "tonight", "yesterday", "tomorrow", "ago", "last", "next", "this", "past",
                          "recent", "recently", "every", "each", "several", "few", "current", "annual", "now"])



def pluralize(phrase: str) -> str:
    """The plural of a (possibly multi-word) English noun phrase: "pop artist" -> "pop artists"."""
    head_start = phrase.rfind(" ") + 1
    prefix, word = phrase[:head_start], phrase[head_start:]
    lower = word.lower()
    if lower in IRREGULAR_PLURALS:
        plural = IRREGULAR_PLURALS[lower]
    elif lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        plural = word[:-1] + "ies"
    elif lower.endswith(("s", "x", "z", "ch", "sh")):
        plural = word + "es"
    else:
        plural = word + "s"
    return prefix + plural


def indefinite_article(word: str) -> str:
    lower = word.lower()
    vowel = lower[:1] in ("a", "e", "i", "o", "u") and not lower.startswith(("uni", "use", "usu", "eu", "one", "uk"))
    return "an" if vowel or lower.startswith(("hour", "honest", "heir")) else "a"
