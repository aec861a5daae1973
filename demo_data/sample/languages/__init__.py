"""The sample's languages: one module per language, each a `PACK` of names,
places, companies, weekdays, roles, sentence templates per news frame and
filler text (`demo_data.sample.templates` says how a template reads).

`LANGS` maps a language code to its pack. The six SEAHORSE languages make the
SEAHORSE-format splits; French and Portuguese appear only in the mFACE-format
sample.
"""

from demo_data.sample.languages import de, en, es, fr, pt, ru, tr, vi

# In the order the packs were first written: code that walks every pack sees
# them in this order.
LANGS = {module.PACK["code"]: module.PACK for module in (en, de, es, ru, tr, vi, fr, pt)}

SEAHORSE_LANGS = ("de", "en", "es", "ru", "tr", "vi")
