"""Turkish: the names, places, companies, templates and fillers of the
sample's Turkish news (template syntax: `demo_data.sample.templates`).
"""

PACK = dict(
    code="tr",
    places=[
        "İstanbul",
        "Ankara",
        "İzmir",
        "Bursa",
        "Antalya",
        "Konya",
        "Adana",
        "Trabzon",
        "Eskişehir",
        "Kayseri",
        "Gaziantep",
        "Samsun",
        "Mersin",
        "Denizli",
        "Malatya",
        "Erzurum",
        "Sakarya",
        "Van",
    ],
    orgs=[
        "Anadolu Enerji",
        "Ege Tekstil",
        "Karadeniz Lojistik",
        "Toros Çelik",
        "Marmara Gıda",
        "Kapadokya Turizm",
        "Boğaziçi Yazılım",
        "Akdeniz İlaç",
        "Fırat İnşaat",
        "Dicle Tarım",
        "Yıldız Otomotiv",
        "Uludağ Makine",
        "Kızılırmak Madencilik",
        "Zafer Havacılık",
        "Gediz Kimya",
    ],
    given={
        "m": [
            "Mehmet",
            "Mustafa",
            "Ahmet",
            "Ali",
            "Hüseyin",
            "Hasan",
            "İbrahim",
            "Murat",
            "Emre",
            "Burak",
            "Kemal",
            "Serkan",
            "Volkan",
            "Cem",
            "Okan",
        ],
        "f": [
            "Ayşe",
            "Fatma",
            "Zeynep",
            "Elif",
            "Emine",
            "Merve",
            "Selin",
            "Esra",
            "Derya",
            "Gamze",
            "Özlem",
            "Pınar",
            "Sevgi",
            "Tuba",
            "Yasemin",
        ],
    },
    surnames=[
        "Yılmaz",
        "Kaya",
        "Demir",
        "Şahin",
        "Çelik",
        "Yıldırım",
        "Öztürk",
        "Aydın",
        "Özdemir",
        "Arslan",
        "Doğan",
        "Kılıç",
        "Aslan",
        "Çetin",
        "Kara",
        "Koç",
        "Kurt",
        "Özkan",
        "Şimşek",
        "Polat",
        "Korkmaz",
        "Erdem",
        "Güneş",
        "Aksoy",
        "Tekin",
        "Bulut",
        "Uçar",
        "Avcı",
        "Keskin",
        "Ünal",
    ],
    days=["pazartesi günü", "salı günü", "çarşamba günü", "perşembe günü", "cuma günü"],
    roles={
        "minister": "Sanayi Bakanı",
        "mayor": "Belediye Başkanı",
        "governor": "Vali",
        "director": "Genel Müdür",
    },
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
                "{place.loc} düzenlenen operasyonlarda {num} şüpheli <<yakalandı|yakalandılar>>.",
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
                "{org.gen} Genel Müdürü {name}, {num} yıllık görevinin ardından {day} istifa etti.",
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
        "prefix": [
            "gün boyunca çeşitli kaynaklardan edinilen bilgilere göre, ",
            "birçok farklı kaynağın doğruladığı habere göre, ",
            "kamuoyunda büyük ilgi uyandıran gelişmeye göre, ",
        ],
        # Turkish is verb-final: no clause can follow the verb, so no suffixes.
        "suffix": [],
        "sentence": [
            "Bu bilgi gün boyunca birçok farklı kaynak tarafından doğrulandı.",
            "Haber geniş yankı uyandırdı ve büyük ilgi gördü.",
            "Önümüzdeki gün ve haftalarda daha fazla ayrıntının açıklanması bekleniyor.",
        ],
    },
)
