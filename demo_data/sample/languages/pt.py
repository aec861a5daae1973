"""Portuguese: the names, places, companies, templates and fillers of the
sample's Portuguese news (template syntax: `demo_data.sample.templates`).

Appears only in the mFACE-format sample (an XL-Sum language outside the
SEAHORSE six).
"""

PACK = dict(
    code="pt",
    places=[
        "São Paulo",
        "Salvador",
        "Fortaleza",
        "Recife",
        "Curitiba",
        "Manaus",
        "Belém",
        "Goiânia",
        "Campinas",
        "Natal",
        "Maceió",
        "Florianópolis",
        "Vitória",
        "Londrina",
        "Santos",
        "Niterói",
        "Teresina",
        "Porto Alegre",
    ],
    orgs=[
        "Itaí Participações",
        "Energia Paraná",
        "Aços Gerais",
        "Transportes Tietê",
        "Têxtil Nordeste",
        "Farma Pampa",
        "Logística Atlântica",
        "Agro Cerrado",
        "Serra Azul Construções",
        "Bebidas Litoral",
        "Minas Metais",
        "Navegação Amazônia",
        "Química Planalto",
        "Papel Sul",
        "Tecnologia Capixaba",
    ],
    given={
        "m": [
            "João",
            "Pedro",
            "Lucas",
            "Gabriel",
            "Rafael",
            "Marcelo",
            "Rodrigo",
            "Felipe",
            "Bruno",
            "Thiago",
            "Carlos",
            "André",
            "Paulo",
            "Eduardo",
            "Gustavo",
        ],
        "f": [
            "Ana",
            "Maria",
            "Juliana",
            "Fernanda",
            "Camila",
            "Patrícia",
            "Beatriz",
            "Larissa",
            "Mariana",
            "Aline",
            "Renata",
            "Luana",
            "Carolina",
            "Débora",
            "Vanessa",
        ],
    },
    surnames=[
        "Silva",
        "Santos",
        "Oliveira",
        "Souza",
        "Rodrigues",
        "Ferreira",
        "Alves",
        "Pereira",
        "Lima",
        "Gomes",
        "Costa",
        "Ribeiro",
        "Martins",
        "Carvalho",
        "Almeida",
        "Lopes",
        "Soares",
        "Fernandes",
        "Vieira",
        "Barbosa",
        "Rocha",
        "Dias",
        "Nascimento",
        "Andrade",
        "Moreira",
        "Nunes",
        "Marques",
        "Machado",
        "Mendes",
        "Freitas",
    ],
    days=[
        "na segunda-feira",
        "na terça-feira",
        "na quarta-feira",
        "na quinta-feira",
        "na sexta-feira",
    ],
    roles={
        "minister": ("ministro", "ministra"),
        "mayor": ("prefeito", "prefeita"),
        "governor": ("governador", "governadora"),
        "director": ("diretor-presidente", "diretora-presidente"),
    },
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
                "<<nova fábrica|novo fábrica>> da empresa {org} em {place} vai criar {num} vagas.",
            ],
        },
        "election": {
            "article": [
                "{name} foi <eleito|eleita> <prefeito|prefeita> de {place} com {num}% dos votos.",
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
                "a polícia prendeu {day} {num} suspeitos em {place} após uma série de operações.",
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
                "<o|a> {role} da empresa {org}, {name}, renunciou {day} após {num} anos no cargo.",
                "após {num} anos na empresa {org}, {name} <<anunciou|anunciaram>> {day} sua saída.",
            ],
            "summary": [
                "{name} <<deixa|deixam>> a empresa {org} após {num} anos.",
                "<o|a> {role} {name} <<renuncia|renunciam>> ao cargo na empresa {org} após "
                "{num} anos.",
            ],
        },
    },
    fillers={
        "prefix": [
            "segundo informaram diversas fontes ao longo do dia, ",
            "conforme noticiado por vários veículos de imprensa, ",
        ],
        "suffix": [
            ", conforme confirmaram várias fontes ao longo do dia",
            ", no que foi descrito como um avanço muito importante",
        ],
        "sentence": [
            "A informação foi confirmada por várias fontes ao longo do dia.",
            "A notícia teve ampla repercussão e atraiu muita atenção.",
            "Mais detalhes devem ser divulgados nos próximos dias e semanas.",
        ],
    },
)
