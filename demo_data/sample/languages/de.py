"""German: the names, places, companies, templates and fillers of the
sample's German news (template syntax: `demo_data.sample.templates`).
"""

PACK = dict(
    code="de",
    places=[
        "Berlin",
        "Hamburg",
        "München",
        "Köln",
        "Frankfurt",
        "Stuttgart",
        "Düsseldorf",
        "Leipzig",
        "Dresden",
        "Hannover",
        "Nürnberg",
        "Bremen",
        "Bonn",
        "Mainz",
        "Kiel",
        "Rostock",
        "Freiburg",
        "Augsburg",
    ],
    orgs=[
        "Nordwerk",
        "Rheinstahl",
        "Alpenstrom",
        "Elbtech",
        "Hansa Logistik",
        "Spreewerk",
        "Mainfeld Bau",
        "Isartal Pharma",
        "Weserwind",
        "Taunus Software",
        "Harzmetall",
        "Bodensee Textil",
        "Schwarzwald Foods",
        "Ostsee Reederei",
        "Moselgrün Energie",
    ],
    given={
        "m": [
            "Thomas",
            "Michael",
            "Stefan",
            "Andreas",
            "Markus",
            "Jan",
            "Tobias",
            "Florian",
            "Matthias",
            "Jürgen",
            "Klaus",
            "Lukas",
            "Sebastian",
            "Frank",
            "Uwe",
        ],
        "f": [
            "Anna",
            "Julia",
            "Katrin",
            "Sabine",
            "Claudia",
            "Laura",
            "Lena",
            "Sandra",
            "Petra",
            "Monika",
            "Susanne",
            "Nicole",
            "Franziska",
            "Miriam",
            "Jana",
        ],
    },
    surnames=[
        "Müller",
        "Schmidt",
        "Schneider",
        "Fischer",
        "Weber",
        "Meyer",
        "Wagner",
        "Becker",
        "Schulz",
        "Hoffmann",
        "Koch",
        "Richter",
        "Klein",
        "Wolf",
        "Schröder",
        "Neumann",
        "Schwarz",
        "Zimmermann",
        "Braun",
        "Krüger",
        "Hofmann",
        "Hartmann",
        "Lange",
        "Werner",
        "Krause",
        "Lehmann",
        "Köhler",
        "Maier",
        "Vogel",
        "Jung",
    ],
    days=["am Montag", "am Dienstag", "am Mittwoch", "am Donnerstag", "am Freitag"],
    roles={
        "minister": ("Wirtschaftsminister", "Wirtschaftsministerin"),
        "mayor": ("Bürgermeister", "Bürgermeisterin"),
        "governor": ("Landrat", "Landrätin"),
        "director": ("Vorstandschef", "Vorstandschefin"),
    },
    frames={
        "invest": {
            "article": [
                "<der|die> {role} {name} kündigte {day} an, dass {org} {num} Millionen Euro "
                "in {place} investieren <<wird|werden>>.",
                "{org} <<will|wollen>> {num} Millionen Euro in {place} investieren, wie "
                "{role} {name} {day} mitteilte.",
            ],
            "summary": [
                "{org} investiert {num} Millionen Euro in {place}, <<sagt|sagen>> {role} {name}.",
                "<der|die> {role} {name} <<kündigt|kündigen>> eine Investition von {num} "
                "Millionen Euro durch {org} in {place} an.",
            ],
        },
        "protest": {
            "article": [
                "rund {num} Menschen <<haben|hat>> {day} in {place} gegen die Pläne von "
                "{org} demonstriert.",
                "in {place} <<gingen|ging>> {day} etwa {num} Menschen gegen {org} auf die Straße.",
            ],
            "summary": [
                "in {place} <<haben|hat>> {num} Menschen gegen Pläne von {org} protestiert.",
                "{num} Demonstranten <<sind|ist>> in {place} gegen {org} auf die Straße gegangen.",
            ],
        },
        "factory": {
            "article": [
                "{org} hat in {place} <<ein neues|einen neuen>> Werk eröffnet und {num} "
                "Arbeitsplätze geschaffen.",
                "im neuen Werk von {org} in {place} <<sollen|soll>> {num} Menschen arbeiten.",
            ],
            "summary": [
                "<<ein neues|ein neuer>> Werk von {org} in {place} <<schafft|schaffen>> "
                "{num} Arbeitsplätze.",
                "{org} eröffnet in {place} ein Werk mit {num} <<neuen|neue>> Arbeitsplätzen.",
            ],
        },
        "election": {
            "article": [
                "{name} <<ist|sind>> mit {num} Prozent der Stimmen <zum Bürgermeister|zur "
                "Bürgermeisterin> von {place} gewählt worden.",
                "mit {num} Prozent der Stimmen <<gewann|gewannen>> {name} die "
                "Bürgermeisterwahl in {place}.",
            ],
            "summary": [
                "{name} <<wird|werden>> mit {num} Prozent <neuer Bürgermeister|neue "
                "Bürgermeisterin> von {place}.",
                "<der|die> <Kandidat|Kandidatin> {name} <<gewinnt|gewinnen>> in {place} die "
                "Wahl mit {num} Prozent.",
            ],
        },
        "arrest": {
            "article": [
                "die Polizei in {place} <<hat|haben>> {day} {num} Verdächtige festgenommen.",
                "bei Razzien in {place} <<wurden|wurde>> {day} {num} Personen festgenommen, "
                "teilte die Polizei mit.",
            ],
            "summary": [
                "die Polizei <<hat|haben>> in {place} {num} Verdächtige nach Razzien festgenommen.",
                "in {place} <<sind|ist>> {num} Verdächtige bei Razzien gefasst worden.",
            ],
        },
        "storm": {
            "article": [
                "ein Sturm hat in {place} {num} Häuser beschädigt, <<sagte|sagten>> {role} {name}.",
                "<der|die> {role} {name} <<berichtete|berichteten>>, dass der Sturm {num} "
                "Häuser in {place} beschädigt habe.",
            ],
            "summary": [
                "ein Sturm <<hat|haben>> in {place} {num} Häuser beschädigt, so {role} {name}.",
                "in {place} <<wurden|wurde>> {num} Häuser durch einen Sturm beschädigt, "
                "sagt {role} {name}.",
            ],
        },
        "resign": {
            "article": [
                "<der|die> {role} {name} ist {day} nach {num} <<Jahren|Jahre>> bei {org} "
                "zurückgetreten.",
                "nach {num} Jahren an der Spitze von {org} <<hat|haben>> {name} {day} "
                "<seinen|ihren> Rücktritt erklärt.",
            ],
            "summary": [
                "{role} {name} <<verlässt|verlassen>> {org} nach {num} Jahren.",
                "{name} <<tritt|treten>> nach {num} <<Jahren|Jahre>> bei {org} zurück.",
            ],
        },
    },
    fillers={
        # German prefixes would force verb-subject inversion; padding goes at the end.
        "prefix": [],
        "suffix": [
            ", wie aus mehreren übereinstimmenden Berichten im Laufe des Tages hervorging",
            ", was von verschiedenen Seiten ausdrücklich bestätigt wurde",
            ", wie es in zahlreichen Meldungen des Tages hieß",
        ],
        "sentence": [
            "Dies wurde im Laufe des Tages von mehreren Seiten bestätigt.",
            "Die Nachricht fand große Beachtung und wurde vielfach berichtet.",
            "Weitere Einzelheiten sollen in den kommenden Tagen und Wochen folgen.",
        ],
    },
)
