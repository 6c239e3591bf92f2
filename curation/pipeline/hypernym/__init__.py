"""Hypernymization (seed 002, Section 3, "Text Transformation with Hypernymization") and the
rare-entity-type filter that follows it.

On the spaCy parse of a caption, in the paper's order:

1. noun modifiers that are proper nouns, numbers or units are removed ("Two sculptures",
   "Pakistani worker", "Norwich Union offices", "a 5 km race");
2. dates, durations and preposition-based locations are removed ("September 5, 2003",
   "on September 23, 2017", "in Deauville, France", "from the Taj Mahal Hotel"), and so are
   prepositional phrases holding only a title ("the premiere of 'Hollywood Homicide'");
3. named entities are replaced by hypernyms. The paper asks the Knowledge Graph; here a
   curator-editable mapping stands in for it: ``entity_words`` (exact names, e.g.
   "Harrison Ford" -> "actor"), the entity's own generic head word ("the 29th American Film
   Festival" -> "festival"), a title written before a name ("Musician Justin Timberlake" ->
   "musician"), then ``hypernyms`` by spaCy entity label (PERSON -> "person", GPE -> "city" or
   "country"...);
4. coordinations of the same hypernym become one plural ("actor and actor" -> "actors",
   "person and person" -> "people");
5. the text is lower-cased and tidied, and dropped when fewer than ``min_tokens`` words remain.

Before step 3 each name's entity type is checked (a gazetteer of landmarks, products, organisations,
breeds and given names, and the sentence's verbs; see sanity.py), so that the small model's labels are not
mapped blindly; coordinated titled names take their group's plural ("senator and governor" ->
"politicians"). After step 5 the rewrite is checked (consistency.py): a name left (``name_left``), a
broken structure or a rewrite that would fail the paper's text filters again (``inconsistent``); a
rewrite resting on a guess is kept, sent to review or dropped (``on_uncertain``: ``uncertain_rewrite``).

Every step is recorded, like the paper's "what-happened" rows (Table 1). The hypernyms used are
the caption's entity types, which ``rare_entity_types`` counts over the whole run (its minimum may be a
share of the run, ``min_share``).

Modules, by responsibility:

- ``lexicon``: the word lists, plurals and articles;
- ``detect``: finding names (quoted titles, entities, proper-noun runs, gazetteer names);
- ``sanity``: the gazetteer and the entity-type checks before mapping;
- ``mapping``: each name's hypernym;
- ``coordination``: "actor and actor" -> "actors", titled names -> their group's plural;
- ``rewrite``: the steps in order and the output text (``units`` holds its pieces);
- ``consistency``: the checks on the finished rewrite;
- ``filters``: the ``hypernymize`` and ``rare_entity_types`` filters.
"""
from . import consistency  # noqa: F401
from .coordination import Coordinations  # noqa: F401
from .detect import Mention, MentionFinder  # noqa: F401
from .filters import Hypernymize, RareEntityTypes, check_int  # noqa: F401
from .lexicon import *  # noqa: F403
from .lexicon import indefinite_article, pluralize  # noqa: F401
from .mapping import MentionMapper  # noqa: F401
from .rewrite import Prepared, Rewrite  # noqa: F401
from .sanity import Gazetteer, TypeChecks  # noqa: F401
from .units import Unit  # noqa: F401
