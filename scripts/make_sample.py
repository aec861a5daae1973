#!/usr/bin/env python3
"""Generates the bundled SYNTHETIC sample in `seahorse_metrics/data/sample/`.

The sample mimics the file formats of the SEAHORSE release (three TSVs plus an
articles JSONL), of the mFACE spreadsheet, of the TRUE CSVs and of a
continuous-ratings JSONL, so that readers, tasks, the trainer, the scorer and
the meta-evaluation can be exercised end to end without any download. Nothing
in it is real data: articles are template news in de, en, es, ru, tr, vi (plus
fr and pt for mFACE) about invented people and companies in real cities.

Every "No" rating is caused by one specific corruption of an otherwise good
summary (see `make_summary` and the sample README), so each question carries a
real, learnable signal:

  Q1 comprehensible  letters or words scrambled, text cut off mid-word, or
                     words of other languages mixed in
  Q2 repetition      a repeated sentence or a phrase repeated in place
  Q3 grammar         broken agreement (gender, number, case, vowel harmony)
                     or two swapped adjacent words
  Q4 attribution     a name, number, place or company absent from the article
  Q5 main ideas      the summary restates a later sentence, not the lead
  Q6 conciseness     filler clauses, filler sentences or an extra minor fact

Usage:
  python scripts/make_sample.py [--seed 0] [--output_dir DIR]

The output is a pure function of the seed and the size flags: re-running
reproduces byte-identical files. Each file is written atomically.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import gzip
import io
import json
import os
import random
import re
import sys
import tempfile
from typing import Iterable, Optional, Sequence

DEFAULT_OUTPUT_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    "seahorse_metrics", "data", "sample",
)

# ---------------------------------------------------------------------------
# Templates.
#
# A template is a sentence with slots and agreement points:
#   {slot} or {slot.form}  a value of the fact (name, role, place, org, num,
#                          day); `{n:key}` is a noun whose form agrees with the
#                          number (Russian).
#   <m|f>                  chosen by the person's gender; the other one is the
#                          "broken agreement" alternative.
#   <<good|bad|...>>       a fixed agreement: the first alternative is right,
#                          the others are the broken ones.
# Templates start lower-case unless the first word is a name or a German noun;
# the sentence is capitalised after rendering (so filler prefixes can precede
# it).
# ---------------------------------------------------------------------------

FRAMES = ("invest", "protest", "factory", "election", "arrest", "storm", "resign")

# Slots each frame's fact carries, and the range of its number.
FRAME_SLOTS = {
    "invest": ("person", "org", "num", "place", "day"),
    "protest": ("num", "place", "org", "day"),
    "factory": ("org", "place", "num"),
    "election": ("person", "place", "num"),
    "arrest": ("place", "num", "day"),
    "storm": ("place", "num", "person"),
    "resign": ("person", "org", "num", "day"),
}
FRAME_NUMBERS = {
    "invest": (5, 950),
    "protest": (60, 9500),
    "factory": (20, 1900),
    "election": (31, 78),
    "arrest": (3, 60),
    "storm": (12, 950),
    "resign": (3, 28),
}
FRAME_ROLES = {
    "invest": ("minister", "mayor"),
    "election": ("mayor",),
    "storm": ("mayor", "governor"),
    "resign": ("director",),
}

LANGS = {}


def _lang(code: str, **pack) -> None:
    LANGS[code] = dict(code=code, **pack)


_lang(
    "en",
    places=["London", "Manchester", "Glasgow", "Cardiff", "Leeds", "Bristol", "Belfast",
            "Liverpool", "Edinburgh", "Sheffield", "Newcastle", "Aberdeen", "Swansea",
            "Norwich", "Plymouth", "Dundee", "Leicester", "Oxford"],
    orgs=["Northgate Energy", "Harbourline", "Brightwater Foods", "Calder Steel",
          "Redmoor Systems", "Westfield Motors", "Greenvale Power", "Kestrel Airways",
          "Ashdown Pharma", "Thamesbank", "Highcross Logistics", "Stonebridge Homes",
          "Blue Anchor Shipping", "Fernhill Textiles", "Oakridge Media", "Pennine Water"],
    given={"m": ["James", "David", "Daniel", "Michael", "Peter", "Robert", "Andrew", "Simon",
                 "Mark", "Paul", "Richard", "Steven", "Gareth", "Callum", "Neil"],
           "f": ["Sarah", "Emma", "Laura", "Helen", "Rachel", "Claire", "Karen", "Fiona",
                 "Louise", "Megan", "Joanne", "Alison", "Hannah", "Sophie", "Kirsty"]},
    surnames=["Smith", "Jones", "Taylor", "Brown", "Wilson", "Evans", "Roberts", "Walker",
              "Wright", "Robinson", "Thompson", "White", "Hughes", "Edwards", "Green", "Hall",
              "Wood", "Harris", "Clarke", "Jackson", "Turner", "Hill", "Moore", "Cooper",
              "Ward", "Morris", "King", "Baker", "Murray", "Bell"],
    days=["on Monday", "on Tuesday", "on Wednesday", "on Thursday", "on Friday"],
    roles={"minister": "Minister", "mayor": "Mayor", "governor": "Council leader",
           "director": "Chief executive"},
    frames={
        "invest": {
            "article": [
                "{role} {name} said {day} that <his|her> office <<has|have>> secured an "
                "investment of {num} million pounds from {org} for {place}.",
                "{org} will invest {num} million pounds in {place}, {role} {name} "
                "announced {day}.",
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
                "{role} {name} said {num} homes in {place} <<had|has>> been damaged by "
                "the storm.",
            ],
            "summary": [
                "a storm <<has|have>> damaged {num} homes in {place}, according to {role} "
                "{name}.",
                "{num} houses in {place} <<were|was>> damaged by a storm, <<says|say>> "
                "{role} {name}.",
            ],
        },
        "resign": {
            "article": [
                "{role} {name} resigned from {org} {day} after {num} years in the job.",
                "after {num} years at {org}, {role} {name} announced <his|her> "
                "resignation {day}.",
            ],
            "summary": [
                "{role} {name} <<has|have>> stepped down from {org} after {num} years.",
                "{name} <<is|are>> leaving {org} after {num} years, <he|she> said.",
            ],
        },
    },
    fillers={
        "prefix": ["in a move that has been widely discussed, ",
                   "as was reported by several outlets over the course of the day, ",
                   "it has been confirmed by a number of different sources that "],
        "suffix": [", according to reports published on the same day",
                   ", as a number of different sources went on to confirm",
                   ", in what was described as a significant development for the area"],
        "sentence": ["This was confirmed by several different sources over the course of "
                     "the day.",
                     "The news was reported widely and attracted a great deal of attention.",
                     "Further details are expected to be announced in the coming days and "
                     "weeks."],
    },
)

_lang(
    "de",
    places=["Berlin", "Hamburg", "München", "Köln", "Frankfurt", "Stuttgart", "Düsseldorf",
            "Leipzig", "Dresden", "Hannover", "Nürnberg", "Bremen", "Bonn", "Mainz", "Kiel",
            "Rostock", "Freiburg", "Augsburg"],
    orgs=["Nordwerk", "Rheinstahl", "Alpenstrom", "Elbtech", "Hansa Logistik", "Spreewerk",
          "Mainfeld Bau", "Isartal Pharma", "Weserwind", "Taunus Software", "Harzmetall",
          "Bodensee Textil", "Schwarzwald Foods", "Ostsee Reederei", "Moselgrün Energie"],
    given={"m": ["Thomas", "Michael", "Stefan", "Andreas", "Markus", "Jan", "Tobias",
                 "Florian", "Matthias", "Jürgen", "Klaus", "Lukas", "Sebastian", "Frank", "Uwe"],
           "f": ["Anna", "Julia", "Katrin", "Sabine", "Claudia", "Laura", "Lena", "Sandra",
                 "Petra", "Monika", "Susanne", "Nicole", "Franziska", "Miriam", "Jana"]},
    surnames=["Müller", "Schmidt", "Schneider", "Fischer", "Weber", "Meyer", "Wagner",
              "Becker", "Schulz", "Hoffmann", "Koch", "Richter", "Klein", "Wolf", "Schröder",
              "Neumann", "Schwarz", "Zimmermann", "Braun", "Krüger", "Hofmann", "Hartmann",
              "Lange", "Werner", "Krause", "Lehmann", "Köhler", "Maier", "Vogel", "Jung"],
    days=["am Montag", "am Dienstag", "am Mittwoch", "am Donnerstag", "am Freitag"],
    roles={"minister": ("Wirtschaftsminister", "Wirtschaftsministerin"),
           "mayor": ("Bürgermeister", "Bürgermeisterin"),
           "governor": ("Landrat", "Landrätin"),
           "director": ("Vorstandschef", "Vorstandschefin")},
    frames={
        "invest": {
            "article": [
                "<der|die> {role} {name} kündigte {day} an, dass {org} {num} Millionen Euro "
                "in {place} investieren <<wird|werden>>.",
                "{org} <<will|wollen>> {num} Millionen Euro in {place} investieren, wie "
                "{role} {name} {day} mitteilte.",
            ],
            "summary": [
                "{org} investiert {num} Millionen Euro in {place}, <<sagt|sagen>> {role} "
                "{name}.",
                "<der|die> {role} {name} <<kündigt|kündigen>> eine Investition von {num} "
                "Millionen Euro durch {org} in {place} an.",
            ],
        },
        "protest": {
            "article": [
                "rund {num} Menschen <<haben|hat>> {day} in {place} gegen die Pläne von "
                "{org} demonstriert.",
                "in {place} <<gingen|ging>> {day} etwa {num} Menschen gegen {org} auf die "
                "Straße.",
            ],
            "summary": [
                "in {place} <<haben|hat>> {num} Menschen gegen Pläne von {org} protestiert.",
                "{num} Demonstranten <<sind|ist>> in {place} gegen {org} auf die Straße "
                "gegangen.",
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
                "die Polizei <<hat|haben>> in {place} {num} Verdächtige nach Razzien "
                "festgenommen.",
                "in {place} <<sind|ist>> {num} Verdächtige bei Razzien gefasst worden.",
            ],
        },
        "storm": {
            "article": [
                "ein Sturm hat in {place} {num} Häuser beschädigt, <<sagte|sagten>> {role} "
                "{name}.",
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
        "suffix": [", wie aus mehreren übereinstimmenden Berichten im Laufe des Tages "
                   "hervorging",
                   ", was von verschiedenen Seiten ausdrücklich bestätigt wurde",
                   ", wie es in zahlreichen Meldungen des Tages hieß"],
        "sentence": ["Dies wurde im Laufe des Tages von mehreren Seiten bestätigt.",
                     "Die Nachricht fand große Beachtung und wurde vielfach berichtet.",
                     "Weitere Einzelheiten sollen in den kommenden Tagen und Wochen folgen."],
    },
)

_lang(
    "es",
    places=["Madrid", "Barcelona", "Valencia", "Sevilla", "Zaragoza", "Málaga", "Bilbao",
            "Murcia", "Alicante", "Córdoba", "Valladolid", "Vigo", "Granada", "Oviedo",
            "Pamplona", "Santander", "Salamanca", "Toledo"],
    orgs=["Altamar Inversiones", "Iberluz", "Transportes Sierra", "Aceros del Norte",
          "Solmar Energía", "Vientos del Sur", "Farmacéutica Levante", "Textil Mediterránea",
          "Construcciones Duero", "Tajo Logística", "Alimentos Rioverde", "Navíos Cantábrico",
          "Minerales Ebro", "Telecom Meseta", "Bodegas Almenar"],
    given={"m": ["Javier", "Carlos", "Miguel", "Antonio", "José", "Pablo", "Alejandro",
                 "Sergio", "Manuel", "Jorge", "Luis", "Raúl", "Diego", "Fernando", "Álvaro"],
           "f": ["María", "Laura", "Carmen", "Lucía", "Ana", "Elena", "Marta", "Isabel",
                 "Cristina", "Paula", "Sara", "Pilar", "Beatriz", "Rocío", "Silvia"]},
    surnames=["García", "Fernández", "González", "Rodríguez", "López", "Martínez", "Sánchez",
              "Pérez", "Gómez", "Martín", "Jiménez", "Ruiz", "Hernández", "Díaz", "Moreno",
              "Álvarez", "Romero", "Navarro", "Torres", "Domínguez", "Vázquez", "Ramos", "Gil",
              "Serrano", "Blanco", "Molina", "Morales", "Ortega", "Delgado", "Castro"],
    days=["el lunes", "el martes", "el miércoles", "el jueves", "el viernes"],
    roles={"minister": ("ministro", "ministra"), "mayor": ("alcalde", "alcaldesa"),
           "governor": ("delegado del Gobierno", "delegada del Gobierno"),
           "director": ("consejero delegado", "consejera delegada")},
    frames={
        "invest": {
            "article": [
                "<el|la> {role} {name} anunció {day} que {org} invertirá {num} millones de "
                "euros en {place}.",
                "{org} invertirá {num} millones de euros en {place}, según <<anunció|"
                "anunciaron>> {day} <el|la> {role} {name}.",
            ],
            "summary": [
                "{org} <<invertirá|invertirán>> {num} millones de euros en {place}, según "
                "<el|la> {role} {name}.",
                "<el|la> {role} {name} <<anuncia|anuncian>> una inversión de {num} millones "
                "de euros de {org} en {place}.",
            ],
        },
        "protest": {
            "article": [
                "unas {num} personas se <<manifestaron|manifestó>> {day} en {place} contra "
                "los planes de {org}.",
                "cerca de {num} manifestantes <<salieron|salió>> a las calles de {place} "
                "{day} para protestar contra {org}.",
            ],
            "summary": [
                "{num} personas <<protestan|protesta>> en {place} contra los planes de {org}.",
                "unos {num} manifestantes <<marcharon|marchó>> en {place} contra {org}.",
            ],
        },
        "factory": {
            "article": [
                "{org} ha abierto <<una nueva fábrica|un nuevo fábrica>> en {place}, donde "
                "se <<crearán|creará>> {num} empleos.",
                "la nueva planta de {org} en {place} <<dará|darán>> trabajo a {num} personas.",
            ],
            "summary": [
                "{org} <<abre|abren>> una fábrica en {place} con {num} <<nuevos|nuevas>> "
                "empleos.",
                "<<una nueva planta|un nuevo planta>> de {org} en {place} <<creará|crearán>> "
                "{num} puestos de trabajo.",
            ],
        },
        "election": {
            "article": [
                "{name} fue <elegido|elegida> <alcalde|alcaldesa> de {place} con el {num} "
                "por ciento de los votos.",
                "con el {num} por ciento de los votos, {name} <<ganó|ganaron>> las "
                "elecciones municipales en {place}.",
            ],
            "summary": [
                "{name} <<será|serán>> <el nuevo alcalde|la nueva alcaldesa> de {place} tras "
                "lograr el {num} por ciento.",
                "<el candidato|la candidata> {name} <<gana|ganan>> la alcaldía de {place} con "
                "un {num} por ciento.",
            ],
        },
        "arrest": {
            "article": [
                "la policía <<detuvo|detuvieron>> {day} a {num} sospechosos en {place} tras "
                "varias redadas.",
                "{num} personas <<fueron detenidas|fue detenida>> {day} en {place}, informó "
                "la policía.",
            ],
            "summary": [
                "la policía <<detiene|detienen>> a {num} personas en {place} tras varias "
                "redadas.",
                "{num} sospechosos <<fueron arrestados|fue arrestado>> en {place} en una "
                "operación policial.",
            ],
        },
        "storm": {
            "article": [
                "una tormenta dañó {num} viviendas en {place}, <<informó|informaron>> "
                "<el|la> {role} {name}.",
                "<el|la> {role} {name} <<dijo|dijeron>> que {num} casas de {place} "
                "<<resultaron dañadas|resultó dañada>> por la tormenta.",
            ],
            "summary": [
                "una tormenta <<daña|dañan>> {num} casas en {place}, según <el|la> {role} "
                "{name}.",
                "{num} viviendas de {place} <<sufrieron|sufrió>> daños por un temporal, "
                "según <el|la> {role} {name}.",
            ],
        },
        "resign": {
            "article": [
                "<el|la> {role} de {org}, {name}, <<dimitió|dimitieron>> {day} tras {num} "
                "años en el cargo.",
                "tras {num} años en {org}, {name} <<presentó|presentaron>> {day} su "
                "dimisión como {role}.",
            ],
            "summary": [
                "{name} <<deja|dejan>> {org} tras {num} años como {role}.",
                "<el|la> {role} {name} <<abandona|abandonan>> {org} después de {num} años.",
            ],
        },
    },
    fillers={
        "prefix": ["según informaron diversas fuentes a lo largo del día, ",
                   "tal y como confirmaron varios medios de comunicación, ",
                   "en una noticia que ha generado gran atención, "],
        "suffix": [", según confirmaron varias fuentes distintas a lo largo del día",
                   ", en lo que fue descrito como un avance muy significativo",
                   ", tal y como recogieron numerosos medios"],
        "sentence": ["La información fue confirmada por varias fuentes a lo largo de la "
                     "jornada.",
                     "La noticia tuvo una amplia difusión y generó mucha atención.",
                     "Se espera que en los próximos días y semanas se conozcan más detalles."],
    },
)

_lang(
    "ru",
    # (nominative, prepositional, genitive)
    places=[("Москва", "Москве", "Москвы"), ("Казань", "Казани", "Казани"),
            ("Новосибирск", "Новосибирске", "Новосибирска"),
            ("Екатеринбург", "Екатеринбурге", "Екатеринбурга"), ("Самара", "Самаре", "Самары"),
            ("Омск", "Омске", "Омска"), ("Пермь", "Перми", "Перми"), ("Тверь", "Твери", "Твери"),
            ("Тула", "Туле", "Тулы"), ("Воронеж", "Воронеже", "Воронежа"),
            ("Владивосток", "Владивостоке", "Владивостока"),
            ("Иркутск", "Иркутске", "Иркутска"), ("Томск", "Томске", "Томска"),
            ("Ярославль", "Ярославле", "Ярославля"),
            ("Калининград", "Калининграде", "Калининграда"),
            ("Краснодар", "Краснодаре", "Краснодара"), ("Саратов", "Саратове", "Саратова"),
            ("Уфа", "Уфе", "Уфы")],
    orgs=["«Волгатех»", "«Уралпром»", "«Сибэнерго»", "«Северный берег»", "«Балтлогистик»",
          "«Камастрой»", "«Алтайхим»", "«Невская верфь»", "«Донагро»", "«Байкалсофт»",
          "«Полюсмет»", "«Окатекс»", "«Ладога Фарм»", "«Енисейлес»", "«Приморрыба»"],
    given={"m": ["Алексей", "Дмитрий", "Сергей", "Андрей", "Михаил", "Иван", "Николай",
                 "Павел", "Олег", "Игорь", "Владимир", "Роман", "Артём", "Максим", "Евгений"],
           "f": ["Анна", "Елена", "Ольга", "Наталья", "Татьяна", "Мария", "Ирина", "Светлана",
                 "Екатерина", "Юлия", "Марина", "Ксения", "Дарья", "Алина", "Вера"]},
    # Russian surnames agree with the gender: (masculine, feminine).
    surnames=[(s, s + "а") for s in [
        "Иванов", "Петров", "Смирнов", "Кузнецов", "Попов", "Соколов", "Лебедев", "Козлов",
        "Новиков", "Морозов", "Волков", "Соловьёв", "Васильев", "Зайцев", "Павлов",
        "Семёнов", "Голубев", "Виноградов", "Богданов", "Воробьёв", "Фёдоров", "Михайлов",
        "Беляев", "Тарасов", "Белов", "Комаров", "Орлов", "Киселёв", "Макаров", "Андреев"]],
    days=["в понедельник", "во вторник", "в среду", "в четверг", "в пятницу"],
    roles={"minister": "министр экономики", "mayor": "мэр", "governor": "губернатор",
           "director": "генеральный директор"},
    # Noun forms after a number: (1, 2-4, 5+).
    counted={"миллион": ("миллион", "миллиона", "миллионов"),
             "человек": ("человек", "человека", "человек"),
             "демонстрант": ("демонстрант", "демонстранта", "демонстрантов"),
             "место": ("рабочее место", "рабочих места", "рабочих мест"),
             "процент": ("процент", "процента", "процентов"),
             "подозреваемый": ("подозреваемого", "подозреваемых", "подозреваемых"),
             "дом": ("дом", "дома", "домов")},
    frames={
        "invest": {
            "article": [
                "{role} {name} <заявил|заявила> {day}, что компания {org} <<направит|"
                "направят>> {num} {n:миллион} рублей на развитие {place.gen}.",
                "компания {org} <<направит|направят>> {num} {n:миллион} рублей на развитие "
                "{place.gen}, <сообщил|сообщила> {day} {role} {name}.",
            ],
            "summary": [
                "компания {org} <<инвестирует|инвестируют>> {num} {n:миллион} рублей в "
                "проекты в {place.prep}, <заявил|заявила> {role} {name}.",
                "{role} {name} <объявил|объявила> об инвестициях компании {org} в размере "
                "{num} {n:миллион} рублей в {place.prep}.",
            ],
        },
        "protest": {
            "article": [
                "{num} {n:человек} <<вышли|вышел>> {day} на улицы {place.gen} в знак "
                "протеста против планов компании {org}.",
                "{day} в {place.prep} <<прошла|прошли>> акция протеста против планов "
                "компании {org}, в которой <<приняли|принял>> участие {num} {n:человек}.",
            ],
            "summary": [
                "в {place.prep} {num} {n:человек} <<протестовали|протестовал>> против планов "
                "компании {org}.",
                "{num} {n:демонстрант} <<выступили|выступил>> в {place.prep} против компании "
                "{org}.",
            ],
        },
        "factory": {
            "article": [
                "компания {org} <<открыла|открыл>> <<новый завод|новая завод>> в "
                "{place.prep} и <<создала|создал>> {num} {n:место}.",
                "на <<новом заводе|новой заводе>> компании {org} в {place.prep} будут "
                "работать {num} {n:человек}.",
            ],
            "summary": [
                "компания {org} <<открыла|открыли>> завод в {place.prep} на {num} {n:место}.",
                "в {place.prep} <<заработал|заработала>> новый завод компании {org} на {num} "
                "{n:место}.",
            ],
        },
        "election": {
            "article": [
                "{name} <был избран|была избрана> мэром {place.gen}, набрав {num} "
                "{n:процент} голосов.",
                "на выборах мэра {place.gen} <победил|победила> {name}, за <которого|которую> "
                "проголосовали {num} {n:процент} избирателей.",
            ],
            "summary": [
                "{name} <стал|стала> мэром {place.gen} с результатом {num} {n:процент}.",
                "выборы мэра {place.gen} <выиграл|выиграла> {name}, <получивший|получившая> "
                "{num} {n:процент} голосов.",
            ],
        },
        "arrest": {
            "article": [
                "полиция {place.gen} {day} <<задержала|задержали>> {num} {n:подозреваемый} "
                "в ходе серии обысков.",
                "{day} в {place.prep} <<были задержаны|был задержан>> {num} {n:человек}, "
                "сообщили в полиции.",
            ],
            "summary": [
                "в {place.prep} полиция <<задержала|задержали>> {num} {n:человек} после "
                "обысков.",
                "в {place.prep} в ходе полицейской операции <<задержаны|задержан>> {num} "
                "{n:человек}.",
            ],
        },
        "storm": {
            "article": [
                "ураган <<повредил|повредила>> {num} {n:дом} в {place.prep}, <сообщил|"
                "сообщила> {role} {name}.",
                "{role} {name} <заявил|заявила>, что в результате урагана в {place.prep} "
                "<<пострадали|пострадал>> {num} {n:дом}.",
            ],
            "summary": [
                "ураган <<повредил|повредили>> {num} {n:дом} в {place.prep}, <сообщил|"
                "сообщила> {role} {name}.",
                "в {place.prep} из-за урагана <<пострадали|пострадала>> {num} {n:дом}, "
                "<заявил|заявила> {role} {name}.",
            ],
        },
        "resign": {
            "article": [
                "{role} компании {org} {name} {day} <ушёл|ушла> в отставку после {num} "
                "<<лет|года>> работы.",
                "после {num} лет работы в компании {org} {name} {day} <объявил|объявила> "
                "об уходе с поста генерального директора.",
            ],
            "summary": [
                "{name} <ушёл|ушла> с поста главы компании {org} после {num} <<лет|года>> "
                "работы.",
                "{role} компании {org} {name} <оставил|оставила> свой пост после {num} лет.",
            ],
        },
    },
    fillers={
        "prefix": ["как сообщили сразу несколько источников в течение дня, ",
                   "по информации, которую подтвердили различные СМИ, ",
                   "согласно многочисленным сообщениям, появившимся в течение дня, "],
        "suffix": [", о чём в течение дня сообщили сразу несколько источников",
                   ", что было подтверждено различными источниками",
                   ", как отмечалось во многих публикациях в течение дня"],
        "sentence": ["Эта информация была подтверждена несколькими источниками в течение дня.",
                     "Новость широко обсуждалась и привлекла большое внимание.",
                     "Ожидается, что подробности будут объявлены в ближайшие дни и недели."],
    },
)

_lang(
    "tr",
    places=["İstanbul", "Ankara", "İzmir", "Bursa", "Antalya", "Konya", "Adana", "Trabzon",
            "Eskişehir", "Kayseri", "Gaziantep", "Samsun", "Mersin", "Denizli", "Malatya",
            "Erzurum", "Sakarya", "Van"],
    orgs=["Anadolu Enerji", "Ege Tekstil", "Karadeniz Lojistik", "Toros Çelik",
          "Marmara Gıda", "Kapadokya Turizm", "Boğaziçi Yazılım", "Akdeniz İlaç",
          "Fırat İnşaat", "Dicle Tarım", "Yıldız Otomotiv", "Uludağ Makine",
          "Kızılırmak Madencilik", "Zafer Havacılık", "Gediz Kimya"],
    given={"m": ["Mehmet", "Mustafa", "Ahmet", "Ali", "Hüseyin", "Hasan", "İbrahim", "Murat",
                 "Emre", "Burak", "Kemal", "Serkan", "Volkan", "Cem", "Okan"],
           "f": ["Ayşe", "Fatma", "Zeynep", "Elif", "Emine", "Merve", "Selin", "Esra", "Derya",
                 "Gamze", "Özlem", "Pınar", "Sevgi", "Tuba", "Yasemin"]},
    surnames=["Yılmaz", "Kaya", "Demir", "Şahin", "Çelik", "Yıldırım", "Öztürk", "Aydın",
              "Özdemir", "Arslan", "Doğan", "Kılıç", "Aslan", "Çetin", "Kara", "Koç", "Kurt",
              "Özkan", "Şimşek", "Polat", "Korkmaz", "Erdem", "Güneş", "Aksoy", "Tekin",
              "Bulut", "Uçar", "Avcı", "Keskin", "Ünal"],
    days=["pazartesi günü", "salı günü", "çarşamba günü", "perşembe günü", "cuma günü"],
    roles={"minister": "Sanayi Bakanı", "mayor": "Belediye Başkanı", "governor": "Vali",
           "director": "Genel Müdür"},
    frames={
        "invest": {
            "article": [
                "{role} {name}, {org.gen} {place.dat} {num} milyon lira yatırım yapacağını "
                "{day} açıkladı.",
                "{org}, {role} {name} tarafından {day} duyurulan plana göre {place.dat} {num} "
                "milyon lira yatırım <<yapacak|yapacaklar>>.",
            ],
            "summary": [
                "{org}, {place.dat} {num} milyon liralık yatırım <<yapacak|yapacaklar>>, "
                "{role} {name} duyurdu.",
                "{role} {name}, {org.gen} {place.dat} {num} milyon liralık yatırım "
                "yapacağını duyurdu.",
            ],
        },
        "protest": {
            "article": [
                "{place.loc} {day} yaklaşık {num} kişi, {org.gen} planlarını protesto "
                "<<etti|ettiler>>.",
                "{org.gen} projesine karşı {place.loc} düzenlenen gösteriye {day} {num} kişi "
                "<<katıldı|katıldılar>>.",
            ],
            "summary": [
                "{place.loc} {num} kişi {org.gen} planlarına karşı <<yürüdü|yürüdüler>>.",
                "{org}, {place.loc} {num} kişinin katıldığı bir protestoyla karşılaştı.",
            ],
        },
        "factory": {
            "article": [
                "{org}, {place.loc} yeni bir fabrika açarak {num} kişiye istihdam sağladı.",
                "{org.gen} {place.loc} açtığı yeni fabrikada {num} kişi <<çalışacak|"
                "çalışacaklar>>.",
            ],
            "summary": [
                "{org}, {place.loc} açtığı fabrikayla {num} kişiye iş verecek.",
                "{place.loc} açılan {org} fabrikası {num} yeni istihdam <<yaratacak|"
                "yaratacaklar>>.",
            ],
        },
        "election": {
            "article": [
                "{name}, yüzde {num} oy alarak {place} belediye başkanlığına <<seçildi|"
                "seçildiler>>.",
                "{place.loc} yapılan belediye başkanlığı seçimini yüzde {num} oyla {name} "
                "<<kazandı|kazandılar>>.",
            ],
            "summary": [
                "{name}, yüzde {num} oyla {place} belediye başkanı <<seçildi|seçildiler>>.",
                "{place.gen} yeni belediye başkanı yüzde {num} oy alan {name} oldu.",
            ],
        },
        "arrest": {
            "article": [
                "{place.loc} polis {day} düzenlediği operasyonlarda {num} şüpheliyi "
                "gözaltına aldı.",
                "polisin açıklamasına göre {place.loc} {day} {num} kişi gözaltına <<alındı|"
                "alındılar>>.",
            ],
            "summary": [
                "{place.loc} düzenlenen operasyonlarda {num} şüpheli <<yakalandı|"
                "yakalandılar>>.",
                "polis, {place.loc} {num} kişiyi gözaltına aldı.",
            ],
        },
        "storm": {
            "article": [
                "{role} {name}, {place.loc} etkili olan fırtınanın {num} eve zarar verdiğini "
                "söyledi.",
                "fırtına {place.loc} {num} evi hasara <<uğrattı|uğrattılar>>; bilgiyi {role} "
                "{name} verdi.",
            ],
            "summary": [
                "{role} {name.gen} açıklamasına göre {place.loc} fırtına {num} eve zarar "
                "<<verdi|verdiler>>.",
                "fırtına nedeniyle {place.loc} {num} ev hasar <<gördü|gördüler>>, {role} "
                "{name} bildirdi.",
            ],
        },
        "resign": {
            "article": [
                "{org.gen} Genel Müdürü {name}, {num} yıllık görevinin ardından {day} istifa "
                "etti.",
                "{num} yıldır {org.gen} başında olan {name}, {day} görevinden <<ayrıldı|"
                "ayrıldılar>>.",
            ],
            "summary": [
                "{name}, {num} yılın ardından {org.gen} genel müdürlüğünden <<istifa etti|"
                "istifa ettiler>>.",
                "{org.gen} {num} yıllık genel müdürü {name} görevi bıraktı.",
            ],
        },
    },
    fillers={
        "prefix": ["gün boyunca çeşitli kaynaklardan edinilen bilgilere göre, ",
                   "birçok farklı kaynağın doğruladığı habere göre, ",
                   "kamuoyunda büyük ilgi uyandıran gelişmeye göre, "],
        # Turkish is verb-final: no clause can follow the verb, so no suffixes.
        "suffix": [],
        "sentence": ["Bu bilgi gün boyunca birçok farklı kaynak tarafından doğrulandı.",
                     "Haber geniş yankı uyandırdı ve büyük ilgi gördü.",
                     "Önümüzdeki gün ve haftalarda daha fazla ayrıntının açıklanması "
                     "bekleniyor."],
    },
)

_lang(
    "vi",
    places=["Hà Nội", "Hải Phòng", "Đà Nẵng", "Cần Thơ", "Huế", "Nha Trang", "Vinh",
            "Quy Nhơn", "Đà Lạt", "Buôn Ma Thuột", "Thái Nguyên", "Nam Định", "Vũng Tàu",
            "Hạ Long", "Biên Hòa", "Pleiku", "Thanh Hóa", "Phan Thiết"],
    orgs=["Công ty Minh Long", "Tập đoàn Phú Thịnh", "Công ty Sao Việt", "Tập đoàn Hưng Phát",
          "Công ty Đại Dương Xanh", "Tập đoàn Hoàng Gia", "Công ty Kim Cương",
          "Công ty Thành Đạt", "Tập đoàn An Khang", "Công ty Bình Minh", "Công ty Hồng Hà",
          "Tập đoàn Tân Tiến", "Công ty Phương Nam", "Công ty Trường Sơn", "Tập đoàn Vạn Xuân"],
    # Vietnamese names carry gender in the middle and given name.
    given={"m": ["Văn An", "Văn Bình", "Minh Cường", "Đức Dũng", "Quốc Hải", "Văn Hùng",
                 "Minh Khoa", "Đức Lâm", "Hữu Nam", "Quốc Phong", "Văn Quang", "Minh Sơn",
                 "Đức Thắng", "Minh Tuấn", "Quốc Việt"],
           "f": ["Thị Anh", "Thu Hà", "Thị Hằng", "Ngọc Hoa", "Thị Hương", "Thu Lan",
                 "Ngọc Linh", "Thị Mai", "Thu Ngân", "Thị Nhung", "Ngọc Quyên", "Thị Thảo",
                 "Thu Trang", "Thị Vân", "Ngọc Yến"]},
    surnames=["Nguyễn", "Trần", "Lê", "Phạm", "Hoàng", "Huỳnh", "Phan", "Vũ", "Võ", "Đặng",
              "Bùi", "Đỗ", "Hồ", "Ngô", "Dương", "Lý", "Trịnh", "Đinh", "Mai", "Cao"],
    surname_first=True,
    days=["hôm thứ Hai", "hôm thứ Ba", "hôm thứ Tư", "hôm thứ Năm", "hôm thứ Sáu"],
    roles={"minister": "Bộ trưởng", "mayor": "Chủ tịch thành phố", "governor": "Chủ tịch tỉnh",
           "director": "Tổng giám đốc"},
    frames={
        "invest": {
            "article": [
                "{role} {name} {day} cho biết <ông|bà> đã nhận được cam kết đầu tư {num} tỷ "
                "đồng từ {org} cho {place}.",
                "{org} sẽ đầu tư {num} tỷ đồng vào {place}, theo thông báo của {role} {name} "
                "{day}.",
            ],
            "summary": [
                "{org} <<sẽ đầu tư|đầu tư sẽ>> {num} tỷ đồng vào {place}, {role} {name} cho "
                "biết.",
                "{role} {name} công bố khoản đầu tư {num} tỷ đồng của {org} vào {place}.",
            ],
        },
        "protest": {
            "article": [
                "khoảng {num} người <<đã tuần hành|tuần hành đã>> tại {place} {day} để phản "
                "đối kế hoạch của {org}.",
                "{day}, {num} người biểu tình đã tập trung tại {place} để phản đối {org}.",
            ],
            "summary": [
                "{num} người <<xuống đường|đường xuống>> tại {place} phản đối {org}.",
                "người dân {place} phản đối kế hoạch của {org}, với khoảng {num} người tham "
                "gia.",
            ],
        },
        "factory": {
            "article": [
                "{org} đã khánh thành <<nhà máy mới|mới nhà máy>> tại {place}, tạo việc làm "
                "cho {num} lao động.",
                "nhà máy mới của {org} tại {place} sẽ sử dụng {num} công nhân.",
            ],
            "summary": [
                "{org} mở nhà máy tại {place}, tạo {num} việc làm mới.",
                "<<nhà máy mới|mới nhà máy>> của {org} ở {place} sẽ tuyển {num} lao động.",
            ],
        },
        "election": {
            "article": [
                "<ông|bà> {name} đã trúng cử chức chủ tịch thành phố {place} với {num}% số "
                "phiếu.",
                "với {num}% phiếu bầu, <ông|bà> {name} đã trở thành người đứng đầu {place}.",
            ],
            "summary": [
                "<ông|bà> {name} đắc cử chủ tịch {place} với {num}% phiếu bầu.",
                "{place} có lãnh đạo mới là <ông|bà> {name}, người giành {num}% số phiếu.",
            ],
        },
        "arrest": {
            "article": [
                "cảnh sát {place} {day} đã bắt giữ {num} nghi phạm sau nhiều cuộc đột kích.",
                "{num} người <<đã bị bắt|bị đã bắt>> tại {place} {day}, cảnh sát cho biết.",
            ],
            "summary": [
                "cảnh sát bắt giữ {num} người tại {place} sau các cuộc đột kích.",
                "{num} nghi phạm <<đã bị bắt giữ|bị bắt giữ đã>> ở {place}.",
            ],
        },
        "storm": {
            "article": [
                "cơn bão đã làm hư hại {num} ngôi nhà tại {place}, {role} {name} cho biết.",
                "{role} {name} nói rằng {num} căn nhà ở {place} đã bị bão tàn phá.",
            ],
            "summary": [
                "bão làm hư hại {num} <<ngôi nhà|nhà ngôi>> ở {place}, theo {role} {name}.",
                "{num} căn nhà tại {place} bị hư hại do bão, <ông|bà> {name} cho biết.",
            ],
        },
        "resign": {
            "article": [
                "{role} {org} {name} đã từ chức {day} sau {num} năm giữ cương vị này.",
                "sau {num} năm làm việc tại {org}, <ông|bà> {name} {day} đã nộp đơn từ chức.",
            ],
            "summary": [
                "<ông|bà> {name} rời {org} sau {num} năm.",
                "{role} {name} <<từ chức sau|sau từ chức>> {num} năm lãnh đạo {org}.",
            ],
        },
    },
    fillers={
        "prefix": ["theo thông tin từ nhiều nguồn khác nhau trong ngày, ",
                   "như nhiều cơ quan báo chí đã đưa tin, ",
                   "trong một diễn biến thu hút nhiều sự chú ý, "],
        "suffix": [", theo thông tin được nhiều nguồn xác nhận trong ngày",
                   ", như nhiều cơ quan báo chí đã đồng loạt đưa tin"],
        "sentence": ["Thông tin này đã được nhiều nguồn xác nhận trong ngày.",
                     "Tin tức này được lan truyền rộng rãi và thu hút nhiều sự chú ý.",
                     "Dự kiến thêm nhiều chi tiết sẽ được công bố trong những ngày và tuần tới."],
    },
)

# French and Portuguese appear only in the mFACE-format sample (XL-Sum languages
# outside the SEAHORSE six).
_lang(
    "fr",
    places=["Paris", "Lyon", "Marseille", "Toulouse", "Nice", "Nantes", "Strasbourg",
            "Montpellier", "Bordeaux", "Lille", "Rennes", "Reims", "Grenoble", "Dijon",
            "Angers", "Brest", "Limoges", "Tours"],
    orgs=["Valmont Industries", "Énergies du Rhône", "Acier Lorrain", "Transports Garonne",
          "Textiles Vosges", "Pharma Loire", "Logistique Seine", "Agro Bretagne",
          "Aéro Pyrénées", "Bâtiments Alpins", "Médias Provence", "Navale Atlantique",
          "Chimie Normandie", "Verres Champagne", "Numérique Azur"],
    given={"m": ["Jean", "Pierre", "Nicolas", "Thomas", "Julien", "Antoine", "François",
                 "Philippe", "Laurent", "Olivier", "Mathieu", "Sébastien", "Guillaume",
                 "Vincent", "Éric"],
           "f": ["Marie", "Sophie", "Julie", "Camille", "Isabelle", "Nathalie", "Claire",
                 "Émilie", "Céline", "Sandrine", "Aurélie", "Chloé", "Léa", "Manon", "Valérie"]},
    surnames=["Martin", "Bernard", "Dubois", "Durand", "Leroy", "Moreau", "Lefebvre", "Garcia",
              "Bertrand", "Roux", "Fournier", "Morel", "Girard", "André", "Mercier", "Dupont",
              "Lambert", "Bonnet", "Fontaine", "Rousseau", "Blanc", "Guérin", "Muller", "Henry",
              "Roussel", "Perrin", "Chevalier", "Faure", "Gauthier", "Lemoine"],
    days=["lundi", "mardi", "mercredi", "jeudi", "vendredi"],
    roles={"minister": "ministre", "mayor": "maire", "governor": ("préfet", "préfète"),
           "director": ("directeur général", "directrice générale")},
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
                "{num} personnes <<manifestent|manifeste>> à {place} contre les projets de "
                "{org}.",
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
                "<<une nouvelle usine|un nouvel usine>> de {org} va créer {num} emplois à "
                "{place}.",
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
                "la police <<arrête|arrêtent>> {num} personnes à {place} après des "
                "perquisitions.",
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
                "<le|la> {role} de {org}, {name}, a démissionné {day} après {num} ans à ce "
                "poste.",
                "après {num} ans chez {org}, {name} a <<annoncé|annoncée>> sa démission {day}.",
            ],
            "summary": [
                "{name} <<quitte|quittent>> {org} après {num} ans.",
                "<le|la> {role} {name} <<démissionne|démissionnent>> de {org} après {num} ans.",
            ],
        },
    },
    fillers={
        "prefix": ["selon plusieurs sources concordantes au cours de la journée, ",
                   "comme l'ont rapporté de nombreux médias, "],
        "suffix": [", comme l'ont confirmé plusieurs sources au cours de la journée",
                   ", ce qui a été présenté comme une avancée très importante"],
        "sentence": ["L'information a été confirmée par plusieurs sources au cours de la "
                     "journée.",
                     "La nouvelle a été largement relayée et a suscité beaucoup d'attention.",
                     "D'autres détails devraient être annoncés dans les jours et les semaines "
                     "à venir."],
    },
)

_lang(
    "pt",
    places=["São Paulo", "Salvador", "Fortaleza", "Recife", "Curitiba", "Manaus", "Belém",
            "Goiânia", "Campinas", "Natal", "Maceió", "Florianópolis", "Vitória", "Londrina",
            "Santos", "Niterói", "Teresina", "Porto Alegre"],
    orgs=["Itaí Participações", "Energia Paraná", "Aços Gerais", "Transportes Tietê",
          "Têxtil Nordeste", "Farma Pampa", "Logística Atlântica", "Agro Cerrado",
          "Serra Azul Construções", "Bebidas Litoral", "Minas Metais", "Navegação Amazônia",
          "Química Planalto", "Papel Sul", "Tecnologia Capixaba"],
    given={"m": ["João", "Pedro", "Lucas", "Gabriel", "Rafael", "Marcelo", "Rodrigo", "Felipe",
                 "Bruno", "Thiago", "Carlos", "André", "Paulo", "Eduardo", "Gustavo"],
           "f": ["Ana", "Maria", "Juliana", "Fernanda", "Camila", "Patrícia", "Beatriz",
                 "Larissa", "Mariana", "Aline", "Renata", "Luana", "Carolina", "Débora",
                 "Vanessa"]},
    surnames=["Silva", "Santos", "Oliveira", "Souza", "Rodrigues", "Ferreira", "Alves",
              "Pereira", "Lima", "Gomes", "Costa", "Ribeiro", "Martins", "Carvalho", "Almeida",
              "Lopes", "Soares", "Fernandes", "Vieira", "Barbosa", "Rocha", "Dias",
              "Nascimento", "Andrade", "Moreira", "Nunes", "Marques", "Machado", "Mendes",
              "Freitas"],
    days=["na segunda-feira", "na terça-feira", "na quarta-feira", "na quinta-feira",
          "na sexta-feira"],
    roles={"minister": ("ministro", "ministra"), "mayor": ("prefeito", "prefeita"),
           "governor": ("governador", "governadora"),
           "director": ("diretor-presidente", "diretora-presidente")},
    frames={
        "invest": {
            "article": [
                "<o|a> {role} {name} anunciou {day} que a empresa {org} vai investir {num} "
                "milhões de reais em {place}.",
                "a empresa {org} investirá {num} milhões de reais em {place}, <<informou|"
                "informaram>> {day} <o|a> {role} {name}.",
            ],
            "summary": [
                "a empresa {org} <<vai|vão>> investir {num} milhões de reais em {place}, "
                "segundo <o|a> {role} {name}.",
                "<o|a> {role} {name} <<anuncia|anunciam>> investimento de {num} milhões de "
                "reais da empresa {org} em {place}.",
            ],
        },
        "protest": {
            "article": [
                "cerca de {num} pessoas <<protestaram|protestou>> {day} em {place} contra os "
                "planos da empresa {org}.",
                "{day}, quase {num} manifestantes <<saíram|saiu>> às ruas de {place} contra a "
                "empresa {org}.",
            ],
            "summary": [
                "{num} pessoas <<protestam|protesta>> em {place} contra os planos da empresa "
                "{org}.",
                "cerca de {num} manifestantes <<marcharam|marchou>> em {place} contra a "
                "empresa {org}.",
            ],
        },
        "factory": {
            "article": [
                "a empresa {org} inaugurou <<uma nova fábrica|um novo fábrica>> em {place}, "
                "que vai gerar {num} empregos.",
                "a nova fábrica da empresa {org} em {place} <<empregará|empregarão>> {num} "
                "pessoas.",
            ],
            "summary": [
                "a empresa {org} <<abre|abrem>> fábrica em {place} com {num} novos empregos.",
                "<<nova fábrica|novo fábrica>> da empresa {org} em {place} vai criar {num} "
                "vagas.",
            ],
        },
        "election": {
            "article": [
                "{name} foi <eleito|eleita> <prefeito|prefeita> de {place} com {num}% dos "
                "votos.",
                "com {num}% dos votos, {name} <<venceu|venceram>> a eleição para a prefeitura "
                "de {place}.",
            ],
            "summary": [
                "{name} <<é|são>> <o novo prefeito|a nova prefeita> de {place}, com {num}% dos "
                "votos.",
                "<o candidato|a candidata> {name} <<vence|vencem>> a eleição em {place} com "
                "{num}%.",
            ],
        },
        "arrest": {
            "article": [
                "a polícia prendeu {day} {num} suspeitos em {place} após uma série de "
                "operações.",
                "{num} pessoas <<foram presas|foi presa>> {day} em {place}, informou a polícia.",
            ],
            "summary": [
                "a polícia <<prende|prendem>> {num} pessoas em {place} após operações.",
                "{num} suspeitos <<são presos|é preso>> em {place} em operação policial.",
            ],
        },
        "storm": {
            "article": [
                "um temporal danificou {num} casas em {place}, <<disse|disseram>> <o|a> "
                "{role} {name}.",
                "segundo <o|a> {role} {name}, {num} residências de {place} <<foram "
                "danificadas|foi danificada>> pelo temporal.",
            ],
            "summary": [
                "temporal <<danifica|danificam>> {num} casas em {place}, segundo <o|a> {role} "
                "{name}.",
                "{num} casas <<foram atingidas|foi atingida>> por um temporal em {place}, diz "
                "<o|a> {role} {name}.",
            ],
        },
        "resign": {
            "article": [
                "<o|a> {role} da empresa {org}, {name}, renunciou {day} após {num} anos no "
                "cargo.",
                "após {num} anos na empresa {org}, {name} <<anunciou|anunciaram>> {day} sua "
                "saída.",
            ],
            "summary": [
                "{name} <<deixa|deixam>> a empresa {org} após {num} anos.",
                "<o|a> {role} {name} <<renuncia|renunciam>> ao cargo na empresa {org} após "
                "{num} anos.",
            ],
        },
    },
    fillers={
        "prefix": ["segundo informaram diversas fontes ao longo do dia, ",
                   "conforme noticiado por vários veículos de imprensa, "],
        "suffix": [", conforme confirmaram várias fontes ao longo do dia",
                   ", no que foi descrito como um avanço muito importante"],
        "sentence": ["A informação foi confirmada por várias fontes ao longo do dia.",
                     "A notícia teve ampla repercussão e atraiu muita atenção.",
                     "Mais detalhes devem ser divulgados nos próximos dias e semanas."],
    },
)

SEAHORSE_LANGS = ("de", "en", "es", "ru", "tr", "vi")
WORKER_LANG = {"de": "de", "en": "en-US", "es": "es-ES", "ru": "ru", "tr": "tr", "vi": "vi"}
# GEM configs (gem_id prefixes) per language, as in the SEAHORSE release.
GEM_CONFIGS = {
    "en": ("xsum", "xlsum_english", "wiki_lingua_english_en"),
    "de": ("mlsum_de", "wiki_lingua_german_de"),
    "es": ("mlsum_es", "xlsum_spanish", "wiki_lingua_spanish_es"),
    "ru": ("xlsum_russian", "wiki_lingua_russian_ru"),
    "tr": ("xlsum_turkish", "wiki_lingua_turkish_tr"),
    "vi": ("xlsum_vietnamese", "wiki_lingua_vietnamese_vi"),
}
XLSUM_NAMES = {"en": "english", "es": "spanish", "ru": "russian", "tr": "turkish",
               "vi": "vietnamese", "fr": "french", "pt": "portuguese"}

# ---------------------------------------------------------------------------
# Language-specific morphology.
# ---------------------------------------------------------------------------

_TR_BACK, _TR_FRONT = "aıou", "eiöü"
_TR_VOICELESS = "çfhkpsşt"
_TR_FLIP = str.maketrans("aıuoeiüö", "eiüöaıou")


def _tr_last_vowel(word: str) -> str:
    for ch in reversed(word.replace("İ", "i").replace("I", "ı").lower()):
        if ch in _TR_BACK + _TR_FRONT:
            return ch
    return "e"


def tr_case(word: str, case: str) -> str:
    """Turkish case suffix on a proper noun (apostrophe, vowel harmony, d/t).

    Args:
      word: The noun phrase; the suffix attaches to its last word.
      case: One of `loc`, `dat`, `gen`.

    Returns:
      e.g. tr_case("İzmir", "loc") == "İzmir'de".
    """
    vowel = _tr_last_vowel(word)
    back = vowel in _TR_BACK
    last = word[-1].lower()
    ends_in_vowel = last in _TR_BACK + _TR_FRONT + "i"
    if case == "loc":
        suffix = ("t" if last in _TR_VOICELESS else "d") + ("a" if back else "e")
    elif case == "dat":
        suffix = ("y" if ends_in_vowel else "") + ("a" if back else "e")
    elif case == "gen":
        four_way = {"a": "ı", "ı": "ı", "o": "u", "u": "u", "e": "i", "i": "i", "ö": "ü",
                    "ü": "ü"}[vowel]
        suffix = ("n" if ends_in_vowel else "") + four_way + "n"
    else:
        raise ValueError(f"unknown Turkish case {case!r}")
    return f"{word}'{suffix}"


def tr_case_broken(word: str, case: str) -> str:
    """The same suffix with the vowel harmony broken (back <-> front)."""
    good = tr_case(word, case)
    stem, suffix = good.rsplit("'", 1)
    return f"{stem}'{suffix.translate(_TR_FLIP)}"


def ru_number_form(n: int, forms: Sequence[str]) -> int:
    """Index into (one, few, many) for a Russian noun after the number n."""
    if n % 10 == 1 and n % 100 != 11:
        return 0
    if 2 <= n % 10 <= 4 and not 12 <= n % 100 <= 14:
        return 1
    return 2


def format_number(lang: str, n: int) -> str:
    """Thousands separators as newspapers of each language print them."""
    if n < 1000:
        return str(n)
    head, tail = divmod(n, 1000)
    sep = {"en": ",", "ru": " ", "fr": " "}.get(lang, ".")
    return f"{head}{sep}{tail:03d}"


# ---------------------------------------------------------------------------
# Facts and rendering.
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Person:
    given: str
    surname: object  # str, or (masculine, feminine) for Russian
    gender: str  # "m" or "f"
    role: str

    def surname_for(self, gender: str) -> str:
        if isinstance(self.surname, tuple):
            return self.surname[0 if gender == "m" else 1]
        return self.surname


@dataclasses.dataclass(frozen=True)
class Fact:
    """One news event: a frame and the values of its slots."""

    frame: str
    person: Optional[Person]
    place: object  # str, or a tuple of case forms
    org: Optional[str]
    num: int
    day: Optional[str]


@dataclasses.dataclass
class Segment:
    """A piece of a rendered sentence; `wrong` are its broken-agreement variants."""

    text: str
    wrong: tuple[str, ...] = ()


_TEMPLATE_RE = re.compile(r"<<([^<>]*)>>|<([^<>]*)>|\{([^{}]+)\}")


def _full_name(pack: dict, person: Person, gender: str) -> str:
    surname = person.surname_for(gender)
    if pack.get("surname_first"):
        return f"{surname} {person.given}"
    return f"{person.given} {surname}"


def _gendered(value: object, gender: str) -> Segment:
    if isinstance(value, tuple):
        good = value[0 if gender == "m" else 1]
        other = value[1 if gender == "m" else 0]
        return Segment(good, (other,) if other != good else ())
    return Segment(str(value))


def _resolve_slot(pack: dict, fact: Fact, ref: str) -> Segment:
    lang = pack["code"]
    if ref.startswith("n:"):
        forms = pack["counted"][ref[2:]]
        good = forms[ru_number_form(fact.num, forms)]
        return Segment(good, tuple(sorted({f for f in forms if f != good})))
    slot, _, form = ref.partition(".")
    if slot == "name":
        person = fact.person
        name = _full_name(pack, person, person.gender)
        if form == "gen":
            return Segment(tr_case(name, "gen"), (tr_case_broken(name, "gen"),))
        other = "f" if person.gender == "m" else "m"
        wrong_name = _full_name(pack, person, other)
        return Segment(name, (wrong_name,) if wrong_name != name else ())
    if slot == "role":
        return _gendered(pack["roles"][fact.person.role], fact.person.gender)
    if slot == "place":
        place = fact.place
        if lang == "ru":
            nom, prep, gen = place
            if not form:
                return Segment(nom)
            return Segment({"prep": prep, "gen": gen}[form], (nom,))
        if lang == "tr" and form:
            return Segment(tr_case(place, form), (tr_case_broken(place, form),))
        return Segment(place)
    if slot == "org":
        if lang == "tr" and form:
            return Segment(tr_case(fact.org, form), (tr_case_broken(fact.org, form),))
        return Segment(fact.org)
    if slot == "num":
        return Segment(format_number(lang, fact.num))
    if slot == "day":
        return Segment(fact.day)
    raise ValueError(f"unknown slot {{{ref}}} in a {lang} template")


def render(pack: dict, template: str, fact: Fact) -> list[Segment]:
    """Fills a template with a fact's values; agreement points keep their variants."""
    segments: list[Segment] = []
    pos = 0
    for match in _TEMPLATE_RE.finditer(template):
        if match.start() > pos:
            segments.append(Segment(template[pos:match.start()]))
        fixed, gendered, slot = match.groups()
        if fixed is not None:
            good, *bad = fixed.split("|")
            segments.append(Segment(good, tuple(bad)))
        elif gendered is not None:
            masc, fem = gendered.split("|")
            segments.append(_gendered((masc, fem), fact.person.gender))
        else:
            segments.append(_resolve_slot(pack, fact, slot))
        pos = match.end()
    if pos < len(template):
        segments.append(Segment(template[pos:]))
    return segments


def capitalise(text: str, lang: str) -> str:
    if not text:
        return text
    first = text[0]
    upper = "İ" if (lang == "tr" and first == "i") else first.upper()
    return upper + text[1:]


def join_segments(segments: Iterable[Segment]) -> str:
    return "".join(s.text for s in segments)


def template_slots(template: str) -> set[str]:
    """The fact slots a template mentions (`name`/`role` count as `person`)."""
    slots = set()
    for match in _TEMPLATE_RE.finditer(template):
        ref = match.group(3)
        if ref is None or ref.startswith("n:"):
            continue
        slot = ref.partition(".")[0]
        slots.add("person" if slot in ("name", "role") else slot)
    return slots


# ---------------------------------------------------------------------------
# Articles.
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class Article:
    lang: str
    facts: list[Fact]
    text: str


def _newsy_number(rng: random.Random, lo: int, hi: int) -> int:
    """A number as news prints it: round above 100; never ending in 1 (keeps
    Russian number agreement in the plural)."""
    while True:
        n = rng.randint(lo, hi)
        if n >= 1000:
            n = round(n, -2)
        elif n >= 100:
            n = round(n, -1)
        if n % 10 != 1 and lo <= n <= hi:
            return n


def _place_key(place: object) -> str:
    return place[0] if isinstance(place, tuple) else place


def _surname_key(surname: object) -> str:
    return surname[0] if isinstance(surname, tuple) else surname


class ValuePool:
    """Draws slot values for one article, never reusing one within it.

    With `keep=False` a value is drawn from those the article does not use
    without being recorded, as the wrong values of unfaithful summaries are.
    """

    def __init__(self, rng: random.Random, pack: dict):
        self.rng = rng
        self.pack = pack
        self.places: set[str] = set()
        self.orgs: set[str] = set()
        self.surnames: set[str] = set()
        self.given: set[str] = set()
        self.nums: set[int] = set()

    def place(self, keep: bool = True) -> object:
        choices = [p for p in self.pack["places"] if _place_key(p) not in self.places]
        value = self.rng.choice(choices)
        if keep:
            self.places.add(_place_key(value))
        return value

    def org(self, keep: bool = True) -> str:
        value = self.rng.choice([o for o in self.pack["orgs"] if o not in self.orgs])
        if keep:
            self.orgs.add(value)
        return value

    def person(self, frame: str, gender: Optional[str] = None, role: Optional[str] = None,
               keep: bool = True) -> Person:
        gender = gender or self.rng.choice("mf")
        given = self.rng.choice([g for g in self.pack["given"][gender] if g not in self.given])
        surname = self.rng.choice(
            [s for s in self.pack["surnames"] if _surname_key(s) not in self.surnames])
        if keep:
            self.given.add(given)
            self.surnames.add(_surname_key(surname))
        return Person(given, surname, gender, role or self.rng.choice(FRAME_ROLES[frame]))

    def num(self, frame: str, keep: bool = True) -> int:
        lo, hi = FRAME_NUMBERS[frame]
        while True:
            n = _newsy_number(self.rng, lo, hi)
            if n not in self.nums:
                if keep:
                    self.nums.add(n)
                return n

    def fact(self, frame: str) -> Fact:
        slots = FRAME_SLOTS[frame]
        return Fact(
            frame=frame,
            person=self.person(frame) if "person" in slots else None,
            place=self.place(),
            org=self.org() if "org" in slots else None,
            num=self.num(frame),
            day=self.rng.choice(self.pack["days"]) if "day" in slots else None,
        )


def make_article(rng: random.Random, lang: str, pool: Optional[ValuePool] = None,
                 n_sentences: Optional[int] = None) -> tuple[Article, ValuePool]:
    """A short news article: a lead fact and 2-3 further facts, one sentence each.

    All sentences come from the same frame pool, so only its position tells
    the lead (the main idea) from the later details.
    """
    pack = LANGS[lang]
    pool = pool or ValuePool(rng, pack)
    n = n_sentences or rng.choice(ARTICLE_SENTENCES)
    frames = rng.sample(FRAMES, n)
    facts = [pool.fact(frame) for frame in frames]
    sentences = []
    for fact in facts:
        template = rng.choice(pack["frames"][fact.frame]["article"])
        sentences.append(capitalise(join_segments(render(pack, template, fact)), lang))
    return Article(lang, facts, " ".join(sentences)), pool


# ---------------------------------------------------------------------------
# Summaries and their corruptions.
# ---------------------------------------------------------------------------

QUESTION_COUNT = 6
ARTICLE_SENTENCES = (3, 3, 3, 4)  # drawn uniformly
Q4_TWO_SWAPS = 0.6  # share of unfaithful summaries with two wrong values, not one


@dataclasses.dataclass
class Summary:
    text: str
    # Q1..Q6: True = the summary is fine on that dimension.
    labels: tuple[bool, ...]
    corruptions: tuple[str, ...]


def _swap_slot(pool: ValuePool, fact: Fact, slot: str) -> Fact:
    """The fact with one slot replaced by a value the article never mentions."""
    if slot == "person":
        person = pool.person(fact.frame, fact.person.gender, fact.person.role, keep=False)
        return dataclasses.replace(fact, person=person)
    if slot == "place":
        return dataclasses.replace(fact, place=pool.place(keep=False))
    if slot == "org":
        return dataclasses.replace(fact, org=pool.org(keep=False))
    if slot == "num":
        return dataclasses.replace(fact, num=pool.num(fact.frame, keep=False))
    raise ValueError(slot)


def _break_agreement(rng: random.Random, segments: list[Segment]) -> bool:
    points = [s for s in segments if s.wrong and s.text not in s.wrong]
    if not points:
        return False
    point = rng.choice(points)
    point.text = rng.choice(point.wrong)
    return True


def _swap_adjacent_words(rng: random.Random, text: str) -> str:
    words = text.split(" ")
    candidates = [i for i in range(len(words) - 2)
                  if words[i] != words[i + 1]
                  and not re.search(r"[.,;:]$", words[i]) and not re.search(r"[.,;:]$",
                                                                          words[i + 1])]
    i = rng.choice(candidates or list(range(len(words) - 1)))
    words[i], words[i + 1] = words[i + 1], words[i]
    return " ".join(words)


def _insert_suffix(sentence: str, suffix: str) -> str:
    assert sentence.endswith(".")
    return sentence[:-1] + suffix + "."


def _stutter(rng: random.Random, sentence: str) -> str:
    """Repeats a 3-6 word phrase right after itself once or twice, as
    degenerate decoders do."""
    words = sentence.split(" ")
    span = rng.randint(min(3, len(words) - 1), max(1, min(6, len(words) - 2)))
    start = rng.randint(0, len(words) - 1 - span)
    copy = [w.rstrip(",;:") for w in words[start:start + span]]
    copies = copy * rng.choice((1, 2))
    return " ".join(words[:start + span] + copies + words[start + span:])


def _foreign_words() -> dict[str, list[str]]:
    """Words of each language's templates, for the code-switched garble of Q1."""
    words = {}
    for code, pack in LANGS.items():
        found = set()
        for frame in pack["frames"].values():
            for template in frame["summary"] + frame["article"]:
                plain = _TEMPLATE_RE.sub(" ", template)
                found.update(w.strip(".,;:") for w in plain.split() if len(w) > 3)
        words[code] = sorted(w for w in found if w)
    return words


_FOREIGN = _foreign_words()


def _scramble_letters(rng: random.Random, word: str) -> str:
    """Shuffles a word's inner letters ("Plioce hvae aetrserd"), keeping punctuation."""
    core = word.rstrip(".,;:")
    tail = word[len(core):]
    if len(core) < 4:
        return word
    inner = list(core[1:-1])
    for _ in range(3):
        rng.shuffle(inner)
        if "".join(inner) != core[1:-1]:
            break
    return core[0] + "".join(inner) + core[-1] + tail


INCOMPREHENSIBLE_KINDS = {"scramble": 30, "shuffle": 20, "truncate": 25, "garble": 25}


def _incomprehensible(rng: random.Random, lang: str, text: str) -> tuple[str, str]:
    """Text a reader cannot follow, as weak systems produce it.

    scramble: most words have their inner letters shuffled; shuffle: the word
    order is shuffled; truncate: the text stops mid-word; garble: half the
    words are replaced by words of other languages (code-switching).
    """
    words = text.split(" ")
    kinds = sorted(INCOMPREHENSIBLE_KINDS)
    kind = rng.choices(kinds, weights=[INCOMPREHENSIBLE_KINDS[k] for k in kinds])[0]
    if kind == "scramble":
        scrambled = [_scramble_letters(rng, w) if rng.random() < 0.6 else w for w in words]
        if scrambled == words:
            return _incomprehensible(rng, lang, text)
        return " ".join(scrambled), kind
    if kind == "shuffle":
        shuffled = words[:]
        while shuffled == words:
            rng.shuffle(shuffled)
        return " ".join(shuffled), kind
    if kind == "truncate":
        keep = max(2, int(len(words) * rng.uniform(0.4, 0.8)))
        kept = words[:keep]
        kept[-1] = kept[-1].rstrip(".,;:")
        if len(kept[-1]) >= 4:
            kept[-1] = kept[-1][:max(2, len(kept[-1]) // 2)]
        return " ".join(kept), kind
    others = [code for code in sorted(_FOREIGN) if code != lang]
    garbled = []
    for word in words:
        if rng.random() < 0.5:
            garbled.append(rng.choice(_FOREIGN[rng.choice(others)]))
        else:
            garbled.append(word)
    if garbled == words:
        garbled[0] = rng.choice(_FOREIGN[others[0]])
    return " ".join(garbled), kind


def _swap_values(rng: random.Random, pool: ValuePool, fact: Fact, template: str,
                 applied: list[str]) -> Fact:
    """Q4: one or two of the values the template mentions, replaced by unused ones."""
    swappable = sorted(template_slots(template) & {"person", "place", "org", "num"})
    n_swaps = 2 if (len(swappable) > 1 and rng.random() < Q4_TWO_SWAPS) else 1
    for slot in rng.sample(swappable, n_swaps):
        fact = _swap_slot(pool, fact, slot)
        applied.append(f"q4:{slot}")
    return fact


def _ungrammatical(rng: random.Random, segments: list[Segment], applied: list[str]) -> str:
    """Q3: one or two errors, a broken agreement where the template has one,
    else (or in addition) two adjacent words swapped."""
    word_swap = False
    for _ in range(2 if rng.random() < 0.5 else 1):
        if rng.random() < 0.7 and _break_agreement(rng, segments):
            applied.append("q3:agreement")
        elif not word_swap:
            word_swap = True
            applied.append("q3:word_order")
    body = join_segments(segments)
    return _swap_adjacent_words(rng, body) if word_swap else body


def _pad(rng: random.Random, pack: dict, article: Article, base_index: int, body: str,
         applied: list[str]) -> tuple[str, list[str]]:
    """Q6: one or two kinds of padding; returns the main sentence and extra ones."""
    kinds = ["sentence", "extra_fact"]
    kinds += [k for k in ("prefix", "suffix") if pack["fillers"][k]]
    extra_sentences: list[str] = []
    for kind in sorted(rng.sample(kinds, 2 if rng.random() < 0.4 else 1)):
        applied.append(f"q6:{kind}")
        if kind == "prefix":
            body = rng.choice(pack["fillers"]["prefix"]) + body
        elif kind == "suffix":
            body = _insert_suffix(body, rng.choice(pack["fillers"]["suffix"]))
        elif kind == "sentence":
            extra_sentences.append(rng.choice(pack["fillers"]["sentence"]))
        else:
            # A minor fact: never the lead, never the fact already summarised.
            index = rng.choice([i for i in range(1, len(article.facts)) if i != base_index])
            detail = article.facts[index]
            template = rng.choice(pack["frames"][detail.frame]["summary"])
            extra_sentences.insert(0, capitalise(
                join_segments(render(pack, template, detail)), article.lang))
    return body, extra_sentences


def _repeat(rng: random.Random, sentences: list[str], applied: list[str]) -> None:
    """Q2: a sentence said twice, or a phrase stuttered (in place)."""
    if rng.random() < 0.5:
        i = rng.randrange(len(sentences))
        sentences.insert(i + 1, sentences[i])
        applied.append("q2:sentence")
    else:
        sentences[0] = _stutter(rng, sentences[0])
        applied.append("q2:phrase")


def make_summary(rng: random.Random, article: Article, pool: ValuePool,
                 corrupt: Sequence[bool]) -> Summary:
    """A summary with the requested corruptions (corrupt[q - 1] for question q).

    Corruptions are applied in a fixed order: the fact summarised (Q5), the
    values (Q4), grammar (Q3), padding (Q6), repetition (Q2), and last what
    makes the text incomprehensible (Q1).
    """
    pack = LANGS[article.lang]
    applied: list[str] = []
    base_index = rng.randrange(1, len(article.facts)) if corrupt[4] else 0
    fact = article.facts[base_index]
    template = rng.choice(pack["frames"][fact.frame]["summary"])
    if corrupt[3]:
        fact = _swap_values(rng, pool, fact, template, applied)
    segments = render(pack, template, fact)
    body = _ungrammatical(rng, segments, applied) if corrupt[2] else join_segments(segments)
    extra_sentences: list[str] = []
    if corrupt[5]:
        body, extra_sentences = _pad(rng, pack, article, base_index, body, applied)
    sentences = [capitalise(body, article.lang)] + extra_sentences
    if corrupt[1]:
        _repeat(rng, sentences, applied)
    text = " ".join(sentences)
    if corrupt[0]:
        text, kind = _incomprehensible(rng, article.lang, text)
        applied.append(f"q1:{kind}")
    if corrupt[4]:
        applied.append("q5:non_lead")
    return Summary(text, tuple(not c for c in corrupt), tuple(applied))


# Longer summaries (stacked padding and repetition) are redrawn, which keeps
# the sample's inputs within ~150 pieces of the shipped vocabulary.
MAX_SUMMARY_CHARS = 240


def draw_summary(rng: random.Random, article: Article, pool: ValuePool,
                 corrupt: Sequence[bool]) -> Summary:
    """`make_summary`, redrawn while the text is longer than MAX_SUMMARY_CHARS."""
    for _ in range(20):
        summary = make_summary(rng, article, pool, corrupt)
        if len(summary.text) <= MAX_SUMMARY_CHARS:
            return summary
    raise RuntimeError(f"no summary under {MAX_SUMMARY_CHARS} characters for {article.text!r}")


# Probability that each system's summary is corrupted on Q1..Q6. Weaker systems
# fail more often; references are fluent but often unfaithful (as XSum's are).
SYSTEM_ERROR_RATES = {
    "reference": (0.06, 0.05, 0.15, 0.55, 0.35, 0.40),
    "t5_base": (0.22, 0.20, 0.30, 0.50, 0.45, 0.50),
    "t5_base_250": (0.32, 0.28, 0.40, 0.55, 0.50, 0.55),
    "mt5_small": (0.36, 0.34, 0.44, 0.58, 0.52, 0.55),
    "mt5_small_250": (0.42, 0.38, 0.50, 0.62, 0.56, 0.58),
    "mt5_xxl": (0.14, 0.14, 0.24, 0.45, 0.42, 0.50),
    "palm_1shot": (0.16, 0.22, 0.20, 0.45, 0.46, 0.68),
    "palm_finetuned": (0.08, 0.10, 0.15, 0.40, 0.38, 0.45),
}
ENGLISH_ONLY_SYSTEMS = ("t5_base", "t5_base_250")
SYSTEM_WEIGHTS = {"reference": 1.0, "t5_base": 1.0, "t5_base_250": 0.6, "mt5_small": 1.0,
                  "mt5_small_250": 0.6, "mt5_xxl": 1.0, "palm_1shot": 1.0,
                  "palm_finetuned": 1.0}


def draw_corruptions(rng: random.Random, system: str) -> tuple[bool, ...]:
    return tuple(rng.random() < p for p in SYSTEM_ERROR_RATES[system])


def draw_systems(rng: random.Random, lang: str) -> list[str]:
    names = [s for s in sorted(SYSTEM_ERROR_RATES)
             if lang == "en" or s not in ENGLISH_ONLY_SYSTEMS]
    k = rng.choice((2, 3, 3, 4))
    chosen: list[str] = []
    while len(chosen) < k:
        pick = rng.choices(names, weights=[SYSTEM_WEIGHTS[s] for s in names])[0]
        if pick not in chosen:
            chosen.append(pick)
    return chosen


# ---------------------------------------------------------------------------
# Ratings: label noise and the release's quirks.
# ---------------------------------------------------------------------------

LABEL_NOISE = 0.02  # a rater disagrees with the corruption that was applied
UNSURE_RATE = 0.03  # a cell is "Unsure"
EMPTY_RATE = 0.005  # a question2-6 cell is left empty although question1 is not No


def rate(rng: random.Random, labels: Sequence[bool]) -> list[str]:
    """The six rating cells a rater gives a summary with these true labels."""
    cells = []
    for good in labels:
        flipped = rng.random() < LABEL_NOISE
        unsure = rng.random() < UNSURE_RATE
        cells.append("Unsure" if unsure else ("Yes" if good != flipped else "No"))
    for q in range(1, QUESTION_COUNT):
        if cells[0] == "No" or rng.random() < EMPTY_RATE:
            cells[q] = ""
    return cells


# ---------------------------------------------------------------------------
# The SEAHORSE-format sample.
# ---------------------------------------------------------------------------

TSV_HEADER = ("gem_id", "worker_lang", "summary", "model") + tuple(
    f"question{q}" for q in range(1, QUESTION_COUNT + 1))
SEAHORSE_SPLITS = ("train", "validation", "test")
LANG_WEIGHTS = {"en": 0.2, "de": 0.16, "es": 0.16, "ru": 0.16, "tr": 0.16, "vi": 0.16}


@dataclasses.dataclass
class SampleRow:
    gem_id: str
    lang: str
    system: str
    summary: Summary
    cells: list[str]

    def tsv_fields(self) -> list[str]:
        return [self.gem_id, WORKER_LANG[self.lang], self.summary.text, self.system] + self.cells


class GemIds:
    """Unique gem_ids in the release's style: `<config>-<split>-<n>`."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: set[str] = set()

    def new(self, lang: str) -> str:
        config = self.rng.choice(GEM_CONFIGS[lang])
        # SEAHORSE rated summaries of GEM validation and test articles.
        gem_split = self.rng.choice(("validation", "test"))
        while True:
            gem_id = f"{config}-{gem_split}-{self.rng.randrange(20000)}"
            if gem_id not in self.used:
                self.used.add(gem_id)
                return gem_id


def make_seahorse_split(rng: random.Random, gem_ids: GemIds, n_rows: int
                        ) -> tuple[list[SampleRow], dict[str, str]]:
    """Rows of one split (several systems per article) and the split's articles."""
    rows: list[SampleRow] = []
    articles: dict[str, str] = {}
    langs = sorted(LANG_WEIGHTS)
    while len(rows) < n_rows:
        lang = rng.choices(langs, weights=[LANG_WEIGHTS[l] for l in langs])[0]
        article, pool = make_article(rng, lang)
        gem_id = gem_ids.new(lang)
        articles[gem_id] = article.text
        for system in draw_systems(rng, lang)[:n_rows - len(rows)]:
            summary = draw_summary(rng, article, pool, draw_corruptions(rng, system))
            rows.append(SampleRow(gem_id, lang, system, summary, rate(rng, summary.labels)))
    rng.shuffle(rows)
    return rows, articles


def tsv_text(rows: Iterable[SampleRow]) -> str:
    lines = ["\t".join(TSV_HEADER)]
    for row in rows:
        fields = row.tsv_fields()
        for field in fields:
            if "\t" in field or "\n" in field or "\r" in field:
                raise ValueError(f"{row.gem_id}: a field contains a tab or newline: {field!r}")
        lines.append("\t".join(fields))
    return "\n".join(lines) + "\n"


def jsonl_text(records: Iterable[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=False) + "\n" for r in records)


def _count(values: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return dict(sorted(counts.items()))


def source_of(gem_id: str) -> str:
    config = gem_id.split("-", 1)[0]
    for source in ("xlsum", "mlsum", "wiki_lingua"):
        if config.startswith(source + "_"):
            return source
    return config


def split_stats(rows: Sequence[SampleRow]) -> dict:
    """Counts a reader of the split should find (documented in the README)."""
    ratings = {}
    for q in range(QUESTION_COUNT):
        cells = _count((r.cells[q] or "empty") for r in rows)
        yes, no = cells.get("Yes", 0), cells.get("No", 0)
        ratings[f"question{q + 1}"] = dict(cells, yes_rate=round(yes / (yes + no), 4))
    return {
        "rows": len(rows),
        "articles": len({r.gem_id for r in rows}),
        "langs": _count(r.lang for r in rows),
        "sources": _count(source_of(r.gem_id) for r in rows),
        "systems": _count(r.system for r in rows),
        "ratings": ratings,
        "corruptions": _count(c for r in rows for c in r.summary.corruptions),
    }


# ---------------------------------------------------------------------------
# mFACE-, TRUE- and ratings-format samples.
# ---------------------------------------------------------------------------

_WORD_RE = re.compile(r"\w+", re.UNICODE)


class WordTokenizer:
    """Lower-cased unicode words: rouge-score's default tokenizer drops non-ASCII."""

    def tokenize(self, text: str) -> list[str]:
        return _WORD_RE.findall(text.lower())


def _rouge_scorer():
    from rouge_score import rouge_scorer  # only needed for the mFACE columns

    return rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], tokenizer=WordTokenizer())


def word_support(article: str, summary: str) -> float:
    """Share of the summary's words that occur in the article."""
    article_words = set(WordTokenizer().tokenize(article))
    words = WordTokenizer().tokenize(summary)
    return sum(w in article_words for w in words) / max(1, len(words))


MFACE_COLUMNS = ("id", "doc_id", "lang", "split", "input", "summary", "system",
                 "q1_min", "q1_avg", "q1_max", "q2_min", "q2_avg", "q2_max",
                 "q3_min", "q3_avg", "q3_max", "rouge1", "rouge2", "rougeL",
                 "e2e_nli_logprob", "e2e_nli_score")
MFACE_LANGS = ("en", "es", "ru", "tr", "vi", "fr", "pt")
MFACE_SYSTEMS = {"human": "reference", "mt5_xxl": "mt5_xxl",
                 "palm_finetuned": "palm_finetuned", "palm_1shot": "palm_1shot"}
MFACE_RATERS = 3
MFACE_RATER_NOISE = 0.1


def _rater_stats(rng: random.Random, good: bool) -> list[str]:
    votes = [int(good != (rng.random() < MFACE_RATER_NOISE)) for _ in range(MFACE_RATERS)]
    return [str(min(votes)), f"{sum(votes) / MFACE_RATERS:.4f}", str(max(votes))]


def make_mface(rng: random.Random, docs_per_lang: int) -> tuple[list[list[str]], dict]:
    """mFACE-style rows: q1 quality ~ Q1, q2 attribution ~ Q4, q3 informativeness ~ Q6."""
    scorer = _rouge_scorer()
    rows = []
    for lang in MFACE_LANGS:
        for d in range(docs_per_lang):
            article, pool = make_article(rng, lang)
            doc_id = f"{XLSUM_NAMES[lang]}-{d:04d}"
            split = "validation" if d % 3 == 0 else "test"
            systems = sorted(MFACE_SYSTEMS)
            rng.shuffle(systems)
            for system in sorted(systems[:rng.choice((2, 3, 4))]):
                corrupt = draw_corruptions(rng, MFACE_SYSTEMS[system])
                summary = make_summary(rng, article, pool, corrupt)
                labels = summary.labels
                scores = scorer.score(article.text, summary.text)
                support = word_support(article.text, summary.text)
                rows.append([f"{doc_id}-{system}", doc_id, XLSUM_NAMES[lang], split,
                             article.text, summary.text, system]
                            + _rater_stats(rng, labels[0]) + _rater_stats(rng, labels[3])
                            + _rater_stats(rng, labels[5])
                            + [f"{scores[k].fmeasure:.4f}" for k in ("rouge1", "rouge2", "rougeL")]
                            + [f"{_log(support):.4f}", f"{support:.4f}"])
    stats = {"rows": len(rows), "docs": len({r[1] for r in rows}),
             "langs": _count(r[2] for r in rows), "systems": _count(r[6] for r in rows)}
    return rows, stats


def _log(x: float) -> float:
    import math

    return math.log(max(x, 1e-4))


def csv_text(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


# name -> (rows, probability a summary is unfaithful, multi-sentence share)
TRUE_SETS = {"frank": (200, 0.45, 0.2), "summeval": (150, 0.35, 0.8),
             "qags_x": (120, 0.5, 0.0), "paws": (160, 0.5, 0.0)}


def make_true_set(rng: random.Random, name: str) -> tuple[list[list[str]], dict]:
    """English grounding/generated_text pairs; label 1 = consistent (no Q4 swap)."""
    n_rows, p_unfaithful, p_verbose = TRUE_SETS[name]
    rows = []
    while len(rows) < n_rows:
        article, pool = make_article(rng, "en")
        unfaithful = rng.random() < p_unfaithful
        if name == "paws":
            # Sentence pairs: the lead and a paraphrase of it (or with one swapped value).
            lead = article.text.split(". ")[0].rstrip(".") + "."
            corrupt = (False, False, False, unfaithful, False, False)
            pair = make_summary(rng, Article("en", article.facts[:2], lead), pool, corrupt)
            rows.append([lead, pair.text, str(int(not unfaithful))])
            continue
        corrupt = (False, False, rng.random() < 0.1, unfaithful, rng.random() < 0.3,
                   rng.random() < p_verbose)
        summary = make_summary(rng, article, pool, corrupt)
        rows.append([article.text, summary.text, str(int(not unfaithful))])
    return rows, {"rows": len(rows), "consistent": sum(r[2] == "1" for r in rows)}


RATING_PENALTIES = (45, 15, 10, 30, 15, 10)  # points lost per failed question


def make_ratings(rng: random.Random, n_rows: int) -> tuple[list[dict], dict]:
    """SQuALITY-style 1-100 quality ratings of English summaries."""
    records = []
    systems = sorted(SYSTEM_ERROR_RATES)
    for i in range(n_rows):
        article, pool = make_article(rng, "en")
        system = rng.choice(systems)
        summary = draw_summary(rng, article, pool, draw_corruptions(rng, system))
        penalty = sum(p for p, good in zip(RATING_PENALTIES, summary.labels) if not good)
        rating = int(round(min(100.0, max(1.0, 92 - penalty + rng.gauss(0.0, 7.0)))))
        records.append({"id": f"squality-style-{i:04d}", "system": system,
                        "premise": article.text, "hypothesis": summary.text, "rating": rating})
    return records, {"rows": len(records)}


# ---------------------------------------------------------------------------
# Writing.
# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# Unlabelled article-summary pairs (the summarisation datasets' train split).
# ---------------------------------------------------------------------------

# What a journalist's summary gets wrong, per question: never incomprehensible
# or ungrammatical, otherwise as often repetitive, unfaithful, off the lead or
# padded as the sample's references.
CORPUS_ERROR_RATES = (0.0,) + SYSTEM_ERROR_RATES["reference"][1:2] + (0.0,) + \
    SYSTEM_ERROR_RATES["reference"][3:]
CORPUS_PAIRS_PER_LANG = 1500


def make_corpus(rng: random.Random, pairs_per_lang: int) -> tuple[list[dict], dict]:
    """Unlabelled (article, summary) pairs per language, as the train splits of
    XL-Sum, MLSum and WikiLingua are: the text a model learns the languages
    and the task from before any rating is seen. Nobody rated them; the
    summaries are fluent and grammatical, and otherwise as imperfect as the
    references (`CORPUS_ERROR_RATES`)."""
    records, applied = [], []
    for lang in sorted(LANG_WEIGHTS):
        for index in range(pairs_per_lang):
            article, pool = make_article(rng, lang)
            corrupt = [rng.random() < p for p in CORPUS_ERROR_RATES]
            summary = draw_summary(rng, article, pool, corrupt)
            applied.extend(summary.corruptions)
            records.append({"id": f"{lang}-train-{index}", "lang": lang, "text": article.text,
                            "summary": summary.text})
    return records, {"pairs": len(records), "langs": _count(r["lang"] for r in records),
                     "corruptions": _count(applied)}


def build_sample(seed: int, split_rows: dict[str, int], mface_docs_per_lang: int = 12,
                 ratings_rows: int = 200,
                 corpus_pairs_per_lang: int = CORPUS_PAIRS_PER_LANG) -> dict[str, str | bytes]:
    """Every file of the sample: {relative path: content}. Pure function of its args."""

    def rng_for(part: str) -> random.Random:
        return random.Random(f"seahorse-sample-{seed}-{part}")

    files: dict[str, str] = {}
    stats: dict = {"seed": seed, "seahorse": {}}
    gem_ids = GemIds(rng_for("gem_ids"))
    all_articles: dict[str, str] = {}
    for split in SEAHORSE_SPLITS:
        rows, articles = make_seahorse_split(rng_for(split), gem_ids, split_rows[split])
        files[f"seahorse/{split}.tsv"] = tsv_text(rows)
        stats["seahorse"][split] = split_stats(rows)
        all_articles.update(articles)
    files["seahorse/articles.jsonl"] = jsonl_text(
        {"gem_id": g, "text": all_articles[g]} for g in sorted(all_articles))
    mface_rows, stats["mface"] = make_mface(rng_for("mface"), mface_docs_per_lang)
    files["mface/mface_sample.csv"] = csv_text(MFACE_COLUMNS, mface_rows)
    stats["true"] = {}
    for name in TRUE_SETS:
        rows, stats["true"][name] = make_true_set(rng_for(f"true-{name}"), name)
        files[f"true/{name}.csv"] = csv_text(("grounding", "generated_text", "label"), rows)
    records, stats["ratings"] = make_ratings(rng_for("ratings"), ratings_rows)
    files["ratings/squality_style.jsonl"] = jsonl_text(records)
    corpus, stats["corpus"] = make_corpus(rng_for("corpus"), corpus_pairs_per_lang)
    # Compressed as the datasets ship; mtime 0 keeps the bytes reproducible.
    files["corpus/train.jsonl.gz"] = gzip.compress(jsonl_text(corpus).encode("utf-8"), mtime=0)
    files["stats.json"] = json.dumps(stats, ensure_ascii=False, indent=1, sort_keys=True) + "\n"
    return files


def write_atomic(path: str, content: str | bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        if isinstance(content, bytes):
            with os.fdopen(fd, "wb") as f:
                f.write(content)
        else:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
                f.write(content)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_sample(output_dir: str, files: dict[str, str | bytes]) -> None:
    for relative, content in sorted(files.items()):
        write_atomic(os.path.join(output_dir, relative), content)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output_dir", default=DEFAULT_OUTPUT_DIR)
    parser.add_argument("--train_rows", type=int, default=3600)
    parser.add_argument("--validation_rows", type=int, default=1000)
    parser.add_argument("--test_rows", type=int, default=1000)
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    split_rows = {"train": args.train_rows, "validation": args.validation_rows,
                  "test": args.test_rows}
    files = build_sample(args.seed, split_rows)
    write_sample(args.output_dir, files)
    total = sum(len(c if isinstance(c, bytes) else c.encode("utf-8")) for c in files.values())
    print(f"wrote {len(files)} files ({total / 1e6:.2f} MB) to {args.output_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
