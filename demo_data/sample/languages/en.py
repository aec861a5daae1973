"""English: the names, places, companies, templates and fillers of the
sample's English news (template syntax: `demo_data.sample.templates`).
"""

PACK = dict(
    code="en",
    places=[
        "London",
        "Manchester",
        "Glasgow",
        "Cardiff",
        "Leeds",
        "Bristol",
        "Belfast",
        "Liverpool",
        "Edinburgh",
        "Sheffield",
        "Newcastle",
        "Aberdeen",
        "Swansea",
        "Norwich",
        "Plymouth",
        "Dundee",
        "Leicester",
        "Oxford",
    ],
    orgs=[
        "Northgate Energy",
        "Harbourline",
        "Brightwater Foods",
        "Calder Steel",
        "Redmoor Systems",
        "Westfield Motors",
        "Greenvale Power",
        "Kestrel Airways",
        "Ashdown Pharma",
        "Thamesbank",
        "Highcross Logistics",
        "Stonebridge Homes",
        "Blue Anchor Shipping",
        "Fernhill Textiles",
        "Oakridge Media",
        "Pennine Water",
    ],
    given={
        "m": [
            "James",
            "David",
            "Daniel",
            "Michael",
            "Peter",
            "Robert",
            "Andrew",
            "Simon",
            "Mark",
            "Paul",
            "Richard",
            "Steven",
            "Gareth",
            "Callum",
            "Neil",
        ],
        "f": [
            "Sarah",
            "Emma",
            "Laura",
            "Helen",
            "Rachel",
            "Claire",
            "Karen",
            "Fiona",
            "Louise",
            "Megan",
            "Joanne",
            "Alison",
            "Hannah",
            "Sophie",
            "Kirsty",
        ],
    },
    surnames=[
        "Smith",
        "Jones",
        "Taylor",
        "Brown",
        "Wilson",
        "Evans",
        "Roberts",
        "Walker",
        "Wright",
        "Robinson",
        "Thompson",
        "White",
        "Hughes",
        "Edwards",
        "Green",
        "Hall",
        "Wood",
        "Harris",
        "Clarke",
        "Jackson",
        "Turner",
        "Hill",
        "Moore",
        "Cooper",
        "Ward",
        "Morris",
        "King",
        "Baker",
        "Murray",
        "Bell",
    ],
    days=["on Monday", "on Tuesday", "on Wednesday", "on Thursday", "on Friday"],
    roles={
        "minister": "Minister",
        "mayor": "Mayor",
        "governor": "Council leader",
        "director": "Chief executive",
    },
    frames={
        "invest": {
            "article": [
                "{role} {name} said {day} that <his|her> office <<has|have>> secured an "
                "investment of {num} million pounds from {org} for {place}.",
                "{org} will invest {num} million pounds in {place}, {role} {name} announced {day}.",
            ],
            "summary": [
                "an investment of {num} million pounds by {org} in {place} <<has|have>> "
                "been announced by {role} {name}.",
                "{role} {name} <<says|say>> {org} will put {num} million pounds into {place}.",
            ],
        },
        "protest": {
            "article": [
                "about {num} people <<took|takes>> to the streets of {place} {day} to "
                "protest against plans by {org}.",
                "around {num} demonstrators gathered in {place} {day} to oppose the plans "
                "of {org}, organisers said.",
            ],
            "summary": [
                "{num} people <<have|has>> protested in {place} against plans by {org}.",
                "around {num} demonstrators <<were|was>> on the streets of {place} to "
                "oppose {org}.",
            ],
        },
        "factory": {
            "article": [
                "{org} opened <<a|an>> new factory in {place}, creating {num} jobs.",
                "the new plant that {org} opened in {place} <<is|are>> expected to employ "
                "{num} people.",
            ],
            "summary": [
                "<<a|an>> new {org} factory in {place} <<is|are>> set to create {num} jobs.",
                "{num} jobs <<are|is>> being created at a new {org} plant in {place}.",
            ],
        },
        "election": {
            "article": [
                "{name} <<was|were>> elected mayor of {place} with {num} percent of the vote.",
                "with {num} percent of the vote, {name} won the race for mayor of {place}, "
                "<his|her> party said.",
            ],
            "summary": [
                "{name} <<has|have>> won the mayoral election in {place} with {num} percent.",
                "{place} <<has|have>> a new mayor after {name} won {num} percent of the vote.",
            ],
        },
        "arrest": {
            "article": [
                "police in {place} arrested {num} suspects {day} after a series of raids.",
                "{num} people <<were|was>> detained in {place} {day}, police said.",
            ],
            "summary": [
                "police <<have|has>> arrested {num} people in {place} after a series of raids.",
                "{num} suspects <<were|was>> held in {place} following police raids.",
            ],
        },
        "storm": {
            "article": [
                "a storm damaged {num} houses in {place}, {role} {name} said.",
                "{role} {name} said {num} homes in {place} <<had|has>> been damaged by the storm.",
            ],
            "summary": [
                "a storm <<has|have>> damaged {num} homes in {place}, according to {role} {name}.",
                "{num} houses in {place} <<were|was>> damaged by a storm, <<says|say>> "
                "{role} {name}.",
            ],
        },
        "resign": {
            "article": [
                "{role} {name} resigned from {org} {day} after {num} years in the job.",
                "after {num} years at {org}, {role} {name} announced <his|her> resignation {day}.",
            ],
            "summary": [
                "{role} {name} <<has|have>> stepped down from {org} after {num} years.",
                "{name} <<is|are>> leaving {org} after {num} years, <he|she> said.",
            ],
        },
    },
    fillers={
        "prefix": [
            "in a move that has been widely discussed, ",
            "as was reported by several outlets over the course of the day, ",
            "it has been confirmed by a number of different sources that ",
        ],
        "suffix": [
            ", according to reports published on the same day",
            ", as a number of different sources went on to confirm",
            ", in what was described as a significant development for the area",
        ],
        "sentence": [
            "This was confirmed by several different sources over the course of the day.",
            "The news was reported widely and attracted a great deal of attention.",
            "Further details are expected to be announced in the coming days and weeks.",
        ],
    },
)
