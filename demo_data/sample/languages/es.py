"""Spanish: the names, places, companies, templates and fillers of the
sample's Spanish news (template syntax: `demo_data.sample.templates`).
"""

PACK = dict(
    code="es",
    places=[
        "Madrid",
        "Barcelona",
        "Valencia",
        "Sevilla",
        "Zaragoza",
        "Málaga",
        "Bilbao",
        "Murcia",
        "Alicante",
        "Córdoba",
        "Valladolid",
        "Vigo",
        "Granada",
        "Oviedo",
        "Pamplona",
        "Santander",
        "Salamanca",
        "Toledo",
    ],
    orgs=[
        "Altamar Inversiones",
        "Iberluz",
        "Transportes Sierra",
        "Aceros del Norte",
        "Solmar Energía",
        "Vientos del Sur",
        "Farmacéutica Levante",
        "Textil Mediterránea",
        "Construcciones Duero",
        "Tajo Logística",
        "Alimentos Rioverde",
        "Navíos Cantábrico",
        "Minerales Ebro",
        "Telecom Meseta",
        "Bodegas Almenar",
    ],
    given={
        "m": [
            "Javier",
            "Carlos",
            "Miguel",
            "Antonio",
            "José",
            "Pablo",
            "Alejandro",
            "Sergio",
            "Manuel",
            "Jorge",
            "Luis",
            "Raúl",
            "Diego",
            "Fernando",
            "Álvaro",
        ],
        "f": [
            "María",
            "Laura",
            "Carmen",
            "Lucía",
            "Ana",
            "Elena",
            "Marta",
            "Isabel",
            "Cristina",
            "Paula",
            "Sara",
            "Pilar",
            "Beatriz",
            "Rocío",
            "Silvia",
        ],
    },
    surnames=[
        "García",
        "Fernández",
        "González",
        "Rodríguez",
        "López",
        "Martínez",
        "Sánchez",
        "Pérez",
        "Gómez",
        "Martín",
        "Jiménez",
        "Ruiz",
        "Hernández",
        "Díaz",
        "Moreno",
        "Álvarez",
        "Romero",
        "Navarro",
        "Torres",
        "Domínguez",
        "Vázquez",
        "Ramos",
        "Gil",
        "Serrano",
        "Blanco",
        "Molina",
        "Morales",
        "Ortega",
        "Delgado",
        "Castro",
    ],
    days=["el lunes", "el martes", "el miércoles", "el jueves", "el viernes"],
    roles={
        "minister": ("ministro", "ministra"),
        "mayor": ("alcalde", "alcaldesa"),
        "governor": ("delegado del Gobierno", "delegada del Gobierno"),
        "director": ("consejero delegado", "consejera delegada"),
    },
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
                "{org} <<abre|abren>> una fábrica en {place} con {num} <<nuevos|nuevas>> empleos.",
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
                "la policía <<detiene|detienen>> a {num} personas en {place} tras varias redadas.",
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
                "una tormenta <<daña|dañan>> {num} casas en {place}, según <el|la> {role} {name}.",
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
        "prefix": [
            "según informaron diversas fuentes a lo largo del día, ",
            "tal y como confirmaron varios medios de comunicación, ",
            "en una noticia que ha generado gran atención, ",
        ],
        "suffix": [
            ", según confirmaron varias fuentes distintas a lo largo del día",
            ", en lo que fue descrito como un avance muy significativo",
            ", tal y como recogieron numerosos medios",
        ],
        "sentence": [
            "La información fue confirmada por varias fuentes a lo largo de la jornada.",
            "La noticia tuvo una amplia difusión y generó mucha atención.",
            "Se espera que en los próximos días y semanas se conozcan más detalles.",
        ],
    },
)
