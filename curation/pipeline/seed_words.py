"""The default vocabularies of ``caption_seeds`` (seeds.py) and the word forms it matches them on:
class words (Open-Images-like objects), relations (Visual-Genome-like prepositions and verbs), the names,
titles and pronouns that become "person", and ``verb_forms`` / ``noun_forms``, the candidate base forms
of a word as written (shared with the seed checks, seed_checks.py)."""
from __future__ import annotations

CLASSES = (
    # people and figures
    "person", "man", "woman", "boy", "girl", "child", "baby", "infant", "people", "saint", "angel", "cherub",
    "monk", "nun", "bishop", "pope", "priest", "king", "queen", "prince", "princess", "knight", "soldier",
    "warrior", "shepherd", "musician", "rider", "horseman", "beggar", "crowd", "donor",
    # animals
    "horse", "dragon", "dog", "cat", "lion", "bird", "dove", "eagle", "sheep", "lamb", "ox", "cow", "bull",
    "donkey", "camel", "deer", "snake", "serpent", "fish", "monkey", "bear", "wolf", "goat", "pig", "rabbit",
    "unicorn", "elephant", "duck", "swan", "owl", "peacock", "rooster",
    # arms, regalia, religious objects
    "sword", "spear", "lance", "shield", "helmet", "armour", "armor", "crown", "halo", "cross", "crucifix",
    "book", "scroll", "key", "staff", "crozier", "mitre", "chalice", "cup", "bowl", "bottle", "vase", "jug",
    "basket", "bag", "candle", "lamp", "globe", "skull", "bow", "arrow", "axe", "banner", "flag",
    # furniture, buildings, vehicles
    "table", "chair", "throne", "bench", "bed", "cradle", "altar", "tomb", "fountain", "building", "house",
    "church", "castle", "tower", "temple", "wall", "door", "window", "column", "arch", "bridge", "boat", "ship",
    "carriage", "cart", "wheel", "bicycle", "bike", "car", "tent", "ladder",
    # music
    "trumpet", "harp", "lute", "violin", "drum", "guitar", "organ", "flute",
    # nature
    "tree", "plant", "flower", "lily", "rose", "fruit", "apple", "grape", "palm", "bush", "grass", "mountain",
    "rock", "hill", "river", "sea", "lake", "sky", "cloud", "sun", "moon", "star", "rainbow", "fire",
    # clothing and the body
    "hat", "dress", "robe", "cloak", "mantle", "coat", "shoe", "belt", "necklace", "ring", "veil", "hand",
    "head", "face", "foot", "arm", "beard", "wing", "mirror", "umbrella", "clock", "bell", "rope", "chain",
)

PREPOSITIONS = frozenset(["on", "in", "with", "near", "behind", "under", "above", "below", "beside", "at", "inside",
                          "over", "across", "around", "against", "by", "beneath", "between", "among", "along", "atop",
                          "upon", "into", "onto", "underneath", "next", "before", "from", "of", "through", "toward",
                          "towards", "outside", "within", "past"])

RELATIONS = (
    # prepositions (Visual Genome / Open Images relation labels)
    "on", "in", "with", "near", "behind", "under", "above", "below", "beside", "at", "inside", "over", "across",
    "around", "against", "by", "beneath", "between", "among", "along", "atop", "upon", "into", "onto",
    "under", "underneath", "next", "before", "from", "of",
    # verbs (any inflection matches)
    "ride", "hold", "wear", "carry", "slay", "kill", "fight", "attack", "pierce", "strike", "hit", "sit",
    "stand", "lie", "kneel", "hang", "lean", "rest", "look", "watch", "gaze", "eat", "drink", "play", "read",
    "write", "throw", "kiss", "hug", "embrace", "touch", "lead", "pull", "push", "feed", "crown", "bless",
    "baptize", "baptise", "offer", "give", "receive", "show", "point", "walk", "run", "fly", "hunt", "surround",
    "support", "cover", "have", "use", "catch", "chase", "follow", "protect", "guard", "defeat", "trample",
    "wield", "raise", "lift", "adore", "worship", "pray", "nurse", "tame", "bind", "spear", "hold up",
)

NAMES = (
    "george", "demetrius", "michael", "theodore", "martin", "sebastian", "jerome", "francis", "anthony",
    "augustine", "christopher", "nicholas", "lawrence", "stephen", "catherine", "barbara", "margaret",
    "agnes", "lucy", "cecilia", "ursula", "magdalene", "mary", "joseph", "john", "peter", "paul", "andrew",
    "james", "thomas", "matthew", "mark", "luke", "jesus", "christ", "david", "goliath", "moses", "abraham",
    "isaac", "jacob", "adam", "eve", "noah", "daniel", "elijah", "gabriel", "raphael", "herod", "pilate",
    "salome", "holofernes", "venus", "mars", "apollo", "diana", "jupiter", "hercules", "perseus",
    "andromeda", "orpheus", "charles", "maximilian", "constantine", "helena", "virgin", "madonna",
)

TITLES = ("saint", "st", "st.", "san", "santa", "sainte", "emperor", "empress", "king", "queen", "pope",
          "prince", "princess", "duke", "count", "lord", "lady", "sir", "archangel", "prophet", "apostle",
          "bishop", "cardinal", "abbot", "brother", "sister", "father", "mother", "blessed")

PRONOUNS = ("he", "she", "him", "her", "his", "hers", "himself", "herself", "they", "them", "their",
            "theirs", "themselves")

_IRREGULAR = {"slain": "slay", "slew": "slay", "rode": "ride", "ridden": "ride", "held": "hold", "wore": "wear",
              "worn": "wear", "sat": "sit", "stood": "stand", "lay": "lie", "lain": "lie", "knelt": "kneel",
              "hung": "hang", "fought": "fight", "struck": "strike", "led": "lead", "fed": "feed",
              "threw": "throw", "thrown": "throw", "flew": "fly", "flown": "fly", "ran": "run", "wrote": "write",
              "written": "write", "ate": "eat", "eaten": "eat", "drank": "drink", "drunk": "drink",
              "gave": "give", "given": "give", "caught": "catch", "bound": "bind", "has": "have", "had": "have",
              "leant": "lean", "shown": "show"}


def verb_forms(word: str, lemma: str = "") -> set[str]:
    """Base-form candidates of a verb as written (the small model's lemmatizer turns "riding" into
    "rid", so a relation also matches on stripped endings and a table of irregular forms)."""
    word = word.lower()
    forms = {word, lemma.lower(), _IRREGULAR.get(word, word)}
    if word.endswith("ing") and len(word) > 4:
        stem = word[:-3]
        forms |= {stem, stem + "e"}
        if len(stem) > 2 and stem[-1] == stem[-2]:
            forms.add(stem[:-1])
    if word.endswith("ies"):
        forms.add(word[:-3] + "y")
    if word.endswith("es"):
        forms.add(word[:-2])
    if word.endswith("s"):
        forms.add(word[:-1])
    if word.endswith("ed"):
        forms |= {word[:-2], word[:-1]}
        if len(word) > 4 and word[-3] == word[-4]:
            forms.add(word[:-3])
    return forms - {""}


def noun_forms(word: str, lemma: str = "") -> list[str]:
    word = word.lower()
    forms = [word, lemma.lower()]
    if word.endswith("ies"):
        forms.append(word[:-3] + "y")
    if word.endswith("es"):
        forms.append(word[:-2])
    if word.endswith("s"):
        forms.append(word[:-1])
    return [f for f in forms if f]
