"""French: the names, places, companies, templates and fillers of the
sample's French news (template syntax: `demo_data.sample.templates`).

Appears only in the mFACE-format sample (an XL-Sum language outside the
SEAHORSE six).
"""

PACK = dict(
    code="fr",
    places=[
        "Paris",
        "Lyon",
        "Marseille",
        "Toulouse",
        "Nice",
        "Nantes",
        "Strasbourg",
        "Montpellier",
        "Bordeaux",
        "Lille",
        "Rennes",
        "Reims",
        "Grenoble",
        "Dijon",
        "Angers",
        "Brest",
        "Limoges",
        "Tours",
    ],
    orgs=[
        "Valmont Industries",
        "Énergies du Rhône",
        "Acier Lorrain",
        "Transports Garonne",
        "Textiles Vosges",
        "Pharma Loire",
        "Logistique Seine",
        "Agro Bretagne",
        "Aéro Pyrénées",
        "Bâtiments Alpins",
        "Médias Provence",
        "Navale Atlantique",
        "Chimie Normandie",
        "Verres Champagne",
        "Numérique Azur",
    ],
    given={
        "m": [
            "Jean",
            "Pierre",
            "Nicolas",
            "Thomas",
            "Julien",
            "Antoine",
            "François",
            "Philippe",
            "Laurent",
            "Olivier",
            "Mathieu",
            "Sébastien",
            "Guillaume",
            "Vincent",
            "Éric",
        ],
        "f": [
            "Marie",
            "Sophie",
            "Julie",
            "Camille",
            "Isabelle",
            "Nathalie",
            "Claire",
            "Émilie",
            "Céline",
            "Sandrine",
            "Aurélie",
            "Chloé",
            "Léa",
            "Manon",
            "Valérie",
        ],
    },
    surnames=[
        "Martin",
        "Bernard",
        "Dubois",
        "Durand",
        "Leroy",
        "Moreau",
        "Lefebvre",
        "Garcia",
        "Bertrand",
        "Roux",
        "Fournier",
        "Morel",
        "Girard",
        "André",
        "Mercier",
        "Dupont",
        "Lambert",
        "Bonnet",
        "Fontaine",
        "Rousseau",
        "Blanc",
        "Guérin",
        "Muller",
        "Henry",
        "Roussel",
        "Perrin",
        "Chevalier",
        "Faure",
        "Gauthier",
        "Lemoine",
    ],
    days=["lundi", "mardi", "mercredi", "jeudi", "vendredi"],
    roles={
        "minister": "ministre",
        "mayor": "maire",
        "governor": ("préfet", "préfète"),
        "director": ("directeur général", "directrice générale"),
    },
    frames={
        "invest": {
            "article": [
                "<le|la> {role} {name} a annoncé {day} que {org} investira {num} millions "
                "d'euros à {place}.",
                "{org} va investir {num} millions d'euros à {place}, a <<indiqué|indiquée>> "
                "{day} <le|la> {role} {name}.",
            ],
            "summary": [
                "{org} <<va|vont>> investir {num} millions d'euros à {place}, selon <le|la> "
                "{role} {name}.",
                "<le|la> {role} {name} annonce un investissement de {num} millions d'euros de "
                "{org} à {place}.",
            ],
        },
        "protest": {
            "article": [
                "environ {num} personnes <<ont|a>> manifesté {day} à {place} contre les "
                "projets de {org}.",
                "{day}, près de {num} manifestants <<ont|a>> défilé dans les rues de {place} "
                "contre {org}.",
            ],
            "summary": [
                "{num} personnes <<manifestent|manifeste>> à {place} contre les projets de {org}.",
                "à {place}, {num} manifestants <<se sont|s'est>> mobilisés contre {org}.",
            ],
        },
        "factory": {
            "article": [
                "{org} a ouvert <<une nouvelle usine|un nouveau usine>> à {place}, qui "
                "emploiera {num} personnes.",
                "la nouvelle usine de {org} à {place} <<créera|créeront>> {num} emplois.",
            ],
            "summary": [
                "{org} ouvre une usine à {place} avec {num} emplois à la clé.",
                "<<une nouvelle usine|un nouvel usine>> de {org} va créer {num} emplois à {place}.",
            ],
        },
        "election": {
            "article": [
                "{name} a été <élu|élue> maire de {place} avec {num} % des voix.",
                "avec {num} % des suffrages, {name} <<a remporté|ont remporté>> la mairie de "
                "{place}.",
            ],
            "summary": [
                "{name} <<devient|deviennent>> <le nouveau maire|la nouvelle maire> de "
                "{place} avec {num} % des voix.",
                "<le candidat|la candidate> {name} <<remporte|remportent>> l'élection "
                "municipale de {place} avec {num} %.",
            ],
        },
        "arrest": {
            "article": [
                "la police a interpellé {day} {num} suspects à {place} lors d'une série de "
                "perquisitions.",
                "{num} personnes <<ont été|a été>> arrêtées {day} à {place}, selon la police.",
            ],
            "summary": [
                "la police <<arrête|arrêtent>> {num} personnes à {place} après des perquisitions.",
                "{num} suspects <<ont été|a été>> interpellés à {place}.",
            ],
        },
        "storm": {
            "article": [
                "une tempête a endommagé {num} maisons à {place}, a <<déclaré|déclarée>> "
                "<le|la> {role} {name}.",
                "selon <le|la> {role} {name}, {num} habitations de {place} <<ont été|a été>> "
                "endommagées par la tempête.",
            ],
            "summary": [
                "une tempête <<endommage|endommagent>> {num} maisons à {place}, selon <le|la> "
                "{role} {name}.",
                "{num} maisons <<ont été|a été>> touchées par une tempête à {place}, d'après "
                "<le|la> {role} {name}.",
            ],
        },
        "resign": {
            "article": [
                "<le|la> {role} de {org}, {name}, a démissionné {day} après {num} ans à ce poste.",
                "après {num} ans chez {org}, {name} a <<annoncé|annoncée>> sa démission {day}.",
            ],
            "summary": [
                "{name} <<quitte|quittent>> {org} après {num} ans.",
                "<le|la> {role} {name} <<démissionne|démissionnent>> de {org} après {num} ans.",
            ],
        },
    },
    fillers={
        "prefix": [
            "selon plusieurs sources concordantes au cours de la journée, ",
            "comme l'ont rapporté de nombreux médias, ",
        ],
        "suffix": [
            ", comme l'ont confirmé plusieurs sources au cours de la journée",
            ", ce qui a été présenté comme une avancée très importante",
        ],
        "sentence": [
            "L'information a été confirmée par plusieurs sources au cours de la journée.",
            "La nouvelle a été largement relayée et a suscité beaucoup d'attention.",
            "D'autres détails devraient être annoncés dans les jours et les semaines à venir.",
        ],
    },
)
