"""Real-estate listings (sale and rent): asking price vs reduced-from price or deposit, floor vs
building height, area in ㎡, 万元 amounts, agent vs owner."""

from __future__ import annotations

from rubricrl.data.domains import values as v
from rubricrl.data.domains.base import Conv, Field, bullets, lines, prose

NAME = "real_estate"
TOPICS = {"en": ("property listing", "real-estate listing", "rental listing"), "zh": ("房源信息", "房产广告", "租售房源描述")}

FIELDS = [
    Field("listing_type", "enum", ("listing_type", "deal_type", "offer_type"), ("For sale or for rent", "出售或出租"),
          p_schema=0.5, enum=("sale", "rent")),
    Field("property_type", "enum", ("property_type", "home_type"), ("Kind of home", "房屋类型"), p_absent=0.2, p_schema=0.35,
          enum=("apartment", "house", "townhouse")),
    Field("address", "text", ("address", "street_address", "community"), ("Address or compound", "地址/小区")),
    Field("city", "text", ("city", "location"), ("City", "城市"), p_absent=0.2, p_schema=0.4),
    Field("price", "money", ("price", "asking_price", "list_price", "sale_price"), ("Asking price", "售价"),
          p_absent=0.15, p_schema=0.8,
          conv=(Conv(("price_wan", "price_10k_yuan"), 1e-4, ("ten-thousands of yuan (万元)", "万元"), False, "CNY"),
                Conv(("price_thousands", "price_k"), 1e-3, ("thousands of dollars", "千美元"), False, "USD"))),
    Field("old_price", "money", ("previous_price", "original_price"), ("Price before the reduction", "调价前价格"),
          p_absent=0.5, p_schema=0.15, requires="price"),
    Field("rent", "money", ("monthly_rent", "rent", "rent_per_month"), ("Rent per month", "月租金"), p_absent=0.15, p_schema=0.8),
    Field("deposit", "money", ("deposit", "security_deposit"), ("Security deposit", "押金"), p_absent=0.45, p_schema=0.3),
    Field("fee", "money", ("hoa_fee", "monthly_fee", "service_charge"), ("Monthly HOA or management fee", "月物业费"),
          p_absent=0.55, p_schema=0.25),
    Field("area", "qty", ("area", "floor_area", "size_sqm", "area_m2"), ("Floor area in square metres", "建筑面积（平方米）"),
          p_absent=0.15, p_schema=0.7),
    Field("bedrooms", "int", ("bedrooms", "beds", "bedroom_count"), ("Number of bedrooms", "卧室数"), p_absent=0.1, p_schema=0.6),
    Field("bathrooms", "int", ("bathrooms", "baths"), ("Number of bathrooms", "卫生间数"), p_absent=0.3, p_schema=0.4),
    Field("floor", "int", ("floor", "floor_number", "level"), ("Which floor the home is on", "所在楼层"), p_absent=0.35, p_schema=0.4),
    Field("total_floors", "int", ("building_floors", "total_floors"), ("Floors in the building", "总楼层"),
          p_absent=0.3, p_schema=0.15, requires="floor"),
    Field("year_built", "int", ("year_built", "built_in", "construction_year"), ("Year built", "建成年份"),
          p_absent=0.45, p_schema=0.35),
    Field("features", "list", ("features", "highlights", "amenities"), ("Selling points", "房源亮点"), p_absent=0.15, p_schema=0.45),
    Field("pets", "bool", ("pets_allowed", "pet_friendly"), ("Whether pets are allowed", "是否可养宠物"), p_absent=0.55, p_schema=0.3),
    Field("parking", "bool", ("parking", "has_parking", "parking_included"), ("Whether parking is included", "是否含车位"),
          p_absent=0.5, p_schema=0.3),
    Field("available", "date", ("available_from", "move_in_date", "available_date"), ("When one can move in", "可入住日期"),
          p_absent=0.45, p_schema=0.35),
    Field("agent", "text", ("agent_name", "agent", "contact_name"), ("Listing agent", "经纪人"), p_absent=0.25, p_schema=0.5),
    Field("owner", "text", ("owner", "landlord"), ("Owner or landlord", "业主/房东"), p_absent=0.6, p_schema=0.15),
    Field("phone", "text", ("phone", "contact_phone", "agent_phone"), ("Phone number to call", "联系电话"), p_absent=0.35, p_schema=0.4),
]

DISTRACTORS = {"price": [("old_price", "old_vs_new_value"), ("fee", "neighbouring_value")],
               "rent": [("deposit", "neighbouring_value"), ("fee", "neighbouring_value")],
               "floor": [("total_floors", "neighbouring_value")], "agent": [("owner", "two_people")],
               "owner": [("agent", "two_people")]}

NEAR = {
    "en": {"area": ["It feels bigger than most homes nearby."], "year_built": ["The building is fairly new."],
           "parking": ["Street parking in the area can be tight."], "pets": ["Ask the agent about the pet policy."],
           "available": ["Move-in date is flexible."], "deposit": ["A deposit is required."]},
    "zh": {"area": ["面积在同小区里算大的。"], "year_built": ["楼龄较新。"], "parking": ["小区停车比较紧张。"],
           "pets": ["能否养宠物可以和房东商量。"], "available": ["入住时间可商量。"], "deposit": ["需付押金。"]},
}

# Flats (with floors) and houses (without) have their own addresses, so neither contradicts the type.
PLACES = {("en", "apartment"): ("1420 Maple Avenue, Apt 5B", "310 Elm Street, Unit 12", "88 Harbor View Drive, Apt 1704",
                                "655 Riverside Terrace, Unit 9C"),
          ("en", "house"): ("27 Willow Lane", "19 Oakridge Court", "4 Birchwood Close", "112 Hillcrest Road"),
          ("zh", "apartment"): ("望京花园", "锦绣苑", "翠湖天地", "阳光100", "万科城市花园"),
          ("zh", "house"): ("绿地海珀别墅区", "碧桂园别墅区", "龙湖滟澜山", "万科兰乔圣菲")}
FEATURES = {"en": ("south-facing balcony", "floor-to-ceiling windows", "renovated kitchen", "in-unit laundry",
                   "rooftop terrace", "walking distance to the subway"),
            "zh": ("南北通透", "精装修", "近地铁", "带阳台", "采光好", "学区房")}


def sample(rng, lang):
    rent = rng.random() < 0.5
    agent, owner = v.people(rng, lang, 2)
    beds = rng.choice([1, 2, 2, 3, 3, 4])
    numeral = lang == "zh" and rng.random() < 0.5  # 三室两卫
    area = float(rng.randint(40, 70) + beds * rng.randint(14, 22)) + rng.choice([0, 0, 0.5])
    kind = rng.choice(["apartment", "apartment", "house", "townhouse"])
    facts = {
        "listing_type": v.flag("rent" if rent else "sale"), "property_type": v.flag(kind),
        "address": v.text(rng.choice(PLACES[(lang, "apartment" if kind == "apartment" else "house")])),
        "city": v.text(v.city(rng, lang)),
        "area": v.qty(rng, area, "m2", lang), "bedrooms": v.count(beds, numeral),
        "bathrooms": v.count(rng.choice([1, 1, 2]) if beds < 3 else rng.choice([2, 3]), numeral),
        "year_built": v.year(rng.randint(1998, 2022)),
        "features": v.items(rng, rng.sample(FEATURES[lang], rng.randint(2, 3)), lang),
        "pets": v.flag(rng.random() < 0.5), "parking": v.flag(rng.random() < 0.5),
        "available": v.date(rng, *v.random_date(rng, 2026), lang),
        "agent": v.text(agent), "owner": v.text(owner),
        "phone": v.text(f"({rng.randint(201, 989)}) 555-{rng.randint(100, 199):04d}" if lang == "en"
                        else f"1{rng.choice([35, 37, 50, 88])}{rng.randint(1000, 9999)}{rng.randint(1000, 9999)}"),
    }
    if kind == "apartment":
        floors = rng.randint(6, 33)
        facts["floor"], facts["total_floors"] = v.count(rng.randint(2, floors - 1)), v.count(floors)
    if lang == "zh":
        facts["fee"] = v.money(rng, rng.choice([180.0, 260.0, 350.0, 420.0]), lang)
        if rent:
            monthly = float(rng.randint(25, 120) * 100)
            facts["rent"], facts["deposit"] = v.money(rng, monthly, lang), v.money(rng, monthly * rng.choice([1, 2]), lang)
        else:
            price = float(rng.randint(120, 900) * 10000)
            facts["price"], facts["old_price"] = v.money(rng, price, lang), v.money(rng, price + rng.choice([10, 20, 30]) * 1e4, lang)
    else:
        facts["fee"] = v.money(rng, float(rng.choice([180, 240, 320, 410])), lang)
        if rent:
            monthly = float(rng.randint(14, 48) * 100)
            facts["rent"], facts["deposit"] = v.money(rng, monthly, lang), v.money(rng, monthly * rng.choice([1, 1.5, 2]), lang)
        else:
            price = float(rng.randint(250, 1400) * 1000)
            facts["price"], facts["old_price"] = v.money(rng, price, lang), v.money(rng, price + rng.choice([15, 25, 40]) * 1e3, lang)
    return facts


_TYPE_EN = {"apartment": ["apartment"], "house": ["house"], "townhouse": ["townhouse"]}
_TYPE_ZH = {"apartment": ["住宅"], "house": ["独栋别墅"], "townhouse": ["联排别墅"]}


def _money_en(r):
    return [r.line("price", "Asking price: {price}, reduced from {old_price}.", "Now offered at {price}.", "Listed at {price}."),
            r.line("old_price", "(Previously {old_price}.)"),
            r.line("rent", "Rent is {rent} per month, with a deposit of {deposit}.", "Rent: {rent}/month."),
            r.line("deposit", "Deposit: {deposit}."), r.line("fee", "HOA fee of {fee} a month.", "Service charge: {fee}/month.")]


def _money_zh(r):
    return [r.line("price", "售价{price}，原价{old_price}，业主诚心出售。", "现价{price}。", "总价{price}。"),
            r.line("old_price", "（此前挂牌{old_price}。）"),
            r.line("rent", "月租{rent}，押金{deposit}。", "租金每月{rent}。"), r.line("deposit", "押金{deposit}。"),
            r.line("fee", "物业费每月{fee}。")]


def en_prose(r):
    kind = r.by_value("property_type", _TYPE_EN) or "home"
    deal = r.by_value("listing_type", {"sale": ["for sale"], "rent": ["for rent"]})
    return prose([
        r.say(f"Bright {{bedrooms}}-bedroom {kind} {deal} at {{address}}, {{city}}.", f"{kind.capitalize()} {deal} at {{address}}."),
        r.line("area", "The home offers {area} of living space.", "At {area}, it's generous for the area."),
        r.line("bedrooms", "Bedrooms: {bedrooms}; bathrooms: {bathrooms}.", "Number of bedrooms: {bedrooms}."),
        r.line("bathrooms", "Bathrooms: {bathrooms}."),
        r.line("floor", "The unit is on floor {floor} of a building with {total_floors} floors.", "It's on floor {floor}."),
        r.line("year_built", "The building was completed in {year_built}."), r.line("features", "Highlights include {features}."),
        *_money_en(r), r.by_value("pets", {True: ["Pets are welcome."], False: ["Sorry, no pets."]}),
        r.by_value("parking", {True: ["One parking space is included."], False: ["Parking is not included."]}),
        r.line("available", "Available from {available}."), r.line("owner", "The owner, {owner}, is relocating."),
        r.line("agent", "Contact {agent} at {phone} to arrange a viewing.", "Call {agent} to book a viewing."),
        r.line("phone", "Viewings: {phone}."),
    ], "en")


def en_bullets(r):
    return lines([
        r.say("{address} - {city}", "{address}"),
        *bullets([r.by_value("listing_type", {"sale": ["For sale"], "rent": ["For rent"]}),
                  r.by_value("property_type", {k: [t[0].capitalize()] for k, t in _TYPE_EN.items()}),
                  r.line("bedrooms", "{bedrooms} bed / {bathrooms} bath", "Bedrooms: {bedrooms}"),
                  r.line("bathrooms", "Bathrooms: {bathrooms}"),
                  r.line("area", "{area}", near=("Spacious layout",)), r.line("floor", "Floor {floor} of {total_floors}", "Floor {floor}"),
                  r.line("year_built", "Built {year_built}"), *_money_en(r), r.line("features", "Features: {features}"),
                  r.by_value("pets", {True: ["Pet-friendly"], False: ["No pets"]}),
                  r.by_value("parking", {True: ["Parking included"], False: ["No parking"]}),
                  r.line("available", "Available {available}", near=("Move-in date flexible",))], r.pick(["- ", "• "])),
        r.line("agent", "Agent: {agent}, {phone}", "Agent: {agent}"), r.line("phone", "Tel: {phone}"), r.line("owner", "Owner: {owner}"),
    ])


def en_kv(r):
    return lines([
        r.pick(["LISTING DETAILS", "Property summary"]),
        r.by_value("listing_type", {"sale": ["Status: for sale"], "rent": ["Status: for rent"]}),
        r.by_value("property_type", {k: [f"Type: {t[0]}"] for k, t in _TYPE_EN.items()}),
        r.line("address", "Address: {address}"), r.line("city", "City: {city}"), r.line("price", "Price: {price}"),
        r.line("old_price", "Original price: {old_price}"), r.line("rent", "Rent: {rent} / month"), r.line("deposit", "Deposit: {deposit}"),
        r.line("fee", "HOA: {fee} / month"), r.line("area", "Size: {area}"), r.line("bedrooms", "Bedrooms: {bedrooms}"),
        r.line("bathrooms", "Bathrooms: {bathrooms}"), r.line("floor", "Floor: {floor}"),
        r.line("total_floors", "Building height: {total_floors} floors"),
        r.line("year_built", "Year built: {year_built}", near=("Year built: n/a",)), r.line("features", "Features: {features}"),
        r.by_value("pets", {True: ["Pets: yes"], False: ["Pets: no"]}),
        r.by_value("parking", {True: ["Parking: yes"], False: ["Parking: no"]}),
        r.line("available", "Available: {available}"), r.line("agent", "Agent: {agent}"), r.line("owner", "Owner: {owner}"),
        r.line("phone", "Phone: {phone}"),
    ])


def en_qa(r):
    return lines([
        r.say("Questions about {address}, answered by the agent", "Your questions about the listing at {address}"),
        r.by_value("listing_type", {"sale": ["Q: Is it for sale or for rent? A: For sale."],
                                    "rent": ["Q: Is it for sale or for rent? A: For rent."]}),
        r.by_value("property_type", {k: [f"Q: What kind of home is it? A: A {t[0]}."] for k, t in _TYPE_EN.items()}),
        r.line("price", "Q: What's the price? A: {price}; we dropped it from {old_price}.", "Q: What's the price? A: {price}."),
        r.line("rent", "Q: How much is the rent? A: {rent} a month."), r.line("deposit", "Q: Deposit? A: {deposit}."),
        r.line("fee", "Q: Any monthly fees? A: {fee} for the HOA."), r.line("area", "Q: How big is it? A: {area}."),
        r.line("bedrooms", "Q: How many bedrooms? A: {bedrooms}."), r.line("bathrooms", "Q: And bathrooms? A: {bathrooms}."),
        r.line("floor", "Q: Which floor? A: Floor {floor}, out of {total_floors}.", "Q: Which floor? A: {floor}."),
        "Q: Pets? A: " + r.by_value("pets", {True: ["Yes, pets are fine."], False: ["No, sorry."]}) if r.has("pets") else "",
        "Q: Parking? A: " + r.by_value("parking", {True: ["Yes, one space."], False: ["No."]}) if r.has("parking") else "",
        r.line("available", "Q: When can I move in? A: From {available}."),
        r.line("year_built", "Q: How old is the building? A: Built in {year_built}."),
        r.line("features", "Q: Best features? A: {features}."), r.line("owner", "Q: Who is the owner? A: {owner}."),
        r.line("agent", "Answers by {agent}, call {phone}.", "Answers by {agent}."), r.line("phone", "Call {phone}."),
        r.line("city", "({city})"),
    ])


def en_headline(r):
    title = r.say("Just listed: {bedrooms}-bed home in {city}", "New on the market: {address}", "{city} gem with {features}",
                  "Open house at {address}")
    return lines([title, prose([r.line("address", "Located at {address}."), r.line("city", "In the heart of {city}."),
                                r.by_value("listing_type", {"sale": ["Offered for sale."], "rent": ["Offered for rent."]}),
                                r.by_value("property_type", {k: [f"A lovely {t[0]}."] for k, t in _TYPE_EN.items()}),
                                r.line("bedrooms", "Beds: {bedrooms}. Baths: {bathrooms}."),
                                r.line("bathrooms", "Baths: {bathrooms}."), r.line("area", "{area} of space."),
                                *_money_en(r), r.line("features", "Enjoy {features}."), r.line("floor", "Floor {floor}."),
                                r.line("available", "Ready {available}."), r.line("agent", "Ask for {agent}: {phone}."),
                                r.line("phone", "Tel {phone}."), r.line("owner", "Owner: {owner}.")], "en")])


def zh_prose(r):
    kind = r.by_value("property_type", _TYPE_ZH) or "房子"
    deal = r.by_value("listing_type", {"sale": ["出售"], "rent": ["出租"]})
    return prose([
        r.say(f"{{city}}{{address}}{kind}{deal}。", f"{{address}}{deal}一套{kind}。"),
        r.line("area", "建筑面积{area}。"), r.line("bedrooms", "{bedrooms}室{bathrooms}卫。", "{bedrooms}居室。"),
        r.line("bathrooms", "{bathrooms}个卫生间。"), r.line("floor", "位于{floor}楼，共{total_floors}层。", "所在楼层{floor}层。"),
        r.line("year_built", "{year_built}年建成。"), r.line("features", "房源亮点：{features}。"), *_money_zh(r),
        r.by_value("pets", {True: ["可以养宠物。"], False: ["不可养宠物。"]}),
        r.by_value("parking", {True: ["带一个车位。"], False: ["不含车位。"]}), r.line("available", "{available}起可入住。"),
        r.line("owner", "业主{owner}因工作调动出售。", "房东{owner}人很好说话。"),
        r.line("agent", "看房请联系{agent}，电话{phone}。", "联系经纪人{agent}。"), r.line("phone", "电话：{phone}。"),
    ], "zh")


def zh_bullets(r):
    return lines([
        r.say("【{city}】{address}", "{address}房源要点"),
        *bullets([r.by_value("listing_type", {"sale": ["出售"], "rent": ["出租"]}), r.by_value("property_type", _TYPE_ZH),
                  r.line("bedrooms", "{bedrooms}室{bathrooms}卫", "{bedrooms}室"), r.line("bathrooms", "{bathrooms}卫"),
                  r.line("area", "面积{area}", near=("户型方正，面积宽敞",)), r.line("floor", "{floor}/{total_floors}层", "第{floor}层"),
                  r.line("year_built", "{year_built}年建成"), *_money_zh(r), r.line("features", "{features}"),
                  r.by_value("pets", {True: ["可养宠物"], False: ["禁止养宠物"]}), r.by_value("parking", {True: ["含车位"], False: ["无车位"]}),
                  r.line("available", "{available}可入住")], r.pick(["· ", "- ", "✔ "])),
        r.line("agent", "经纪人：{agent} {phone}", "经纪人：{agent}"), r.line("phone", "电话：{phone}"), r.line("owner", "业主：{owner}"),
    ])


def zh_kv(r):
    rows = [("类型", r.by_value("listing_type", {"sale": ["出售"], "rent": ["出租"]})), ("物业类型", r.by_value("property_type", _TYPE_ZH)),
            ("小区", r.line("address", "{address}")), ("城市", r.line("city", "{city}")), ("总价", r.line("price", "{price}")),
            ("原价", r.line("old_price", "{old_price}")), ("月租", r.line("rent", "{rent}")), ("押金", r.line("deposit", "{deposit}")),
            ("物业费", r.line("fee", "{fee}/月")), ("面积", r.line("area", "{area}")), ("户型", r.line("bedrooms", "{bedrooms}室{bathrooms}卫")),
            ("楼层", r.line("floor", "{floor}层（共{total_floors}层）", "{floor}层")), ("建成年份", r.line("year_built", "{year_built}", near=("不详",))),
            ("亮点", r.line("features", "{features}")), ("宠物", r.by_value("pets", {True: ["可以"], False: ["不可以"]})),
            ("车位", r.by_value("parking", {True: ["有"], False: ["无"]})), ("入住", r.line("available", "{available}")),
            ("经纪人", r.line("agent", "{agent}")), ("业主", r.line("owner", "{owner}")), ("电话", r.line("phone", "{phone}"))]
    sep = r.pick(["：", ": "])
    return lines([r.pick(["房源信息", "【房源详情】"]), *[f"{k}{sep}{t}" for k, t in rows if t]])


def zh_chat(r):
    a, c = r.pick([("中介", "客户"), ("经纪人", "租客")])
    return lines([
        f"{c}：你好，{r.say('{address}那套房子还在吗？', '想问下你们挂的那套房。')}",
        r.by_value("listing_type", {"sale": [f"{c}：是出售的吧？\n{a}：对，出售。"], "rent": [f"{c}：是出租的吧？\n{a}：对，出租。"]}),
        r.by_value("property_type", {k: [f"{a}：房子是{t[0]}。"] for k, t in _TYPE_ZH.items()}),
        f"{a}：在的。" + prose([r.line("price", "现在报价{price}，之前挂的{old_price}。", "报价{price}。"), r.line("old_price", "原来挂{old_price}。"),
                              r.line("rent", "月租{rent}，押金{deposit}。", "月租{rent}。"), r.line("deposit", "押金{deposit}。")], "zh"),
        r.line("area", f"{c}：面积多大？\n{a}：{{area}}。"), r.line("bedrooms", f"{c}：几室的？\n{a}：{{bedrooms}}室{{bathrooms}}卫。"),
        r.line("floor", f"{c}：几楼？\n{a}：{{floor}}楼，一共{{total_floors}}层。", f"{c}：几楼？\n{a}：{{floor}}楼。"),
        r.line("fee", f"{c}：物业费呢？\n{a}：每月{{fee}}。"),
        f"{c}：能养猫吗？\n{a}：" + r.by_value("pets", {True: ["可以。"], False: ["不行，房东不同意。"]}) if r.has("pets") else "",
        f"{c}：有车位吗？\n{a}：" + r.by_value("parking", {True: ["有一个。"], False: ["没有。"]}) if r.has("parking") else "",
        r.line("available", f"{c}：什么时候能住？\n{a}：{{available}}以后。"),
        r.line("features", f"{a}：这套{{features}}，很抢手。"), r.line("year_built", f"{a}：房子是{{year_built}}年的。"),
        r.line("owner", f"{a}：业主{{owner}}这周都有空。"), r.line("agent", f"{a}：我是{{agent}}，电话{{phone}}。", f"{a}：我是经纪人{{agent}}。"),
        r.line("phone", f"{a}：有事打{{phone}}。"), r.line("city", "（{city}）"),
    ])


def zh_headline(r):
    title = r.say("【精选房源】{address}", "{city}{address}，{features}", "{address}{bedrooms}室，随时看房")
    return lines([title, prose([
        r.by_value("listing_type", {"sale": ["本房源出售。"], "rent": ["本房源出租。"]}),
        r.by_value("property_type", {"apartment": ["房屋类型为公寓。"], "house": ["独栋别墅。"], "townhouse": ["联排别墅。"]}),
        r.line("address", "位于{address}。"), r.line("city", "{city}热门板块。"), r.line("area", "面积{area}。"),
        r.line("bedrooms", "{bedrooms}室{bathrooms}卫。"), r.line("bathrooms", "{bathrooms}卫。"), *_money_zh(r),
        r.line("features", "{features}。"), r.line("floor", "{floor}楼。"), r.line("available", "{available}可入住。"),
        r.line("agent", "联系{agent}：{phone}。"), r.line("phone", "电话{phone}。"), r.line("owner", "业主{owner}。")], "zh")])


TEMPLATES = {"en": {"prose": en_prose, "bullets": en_bullets, "kv": en_kv, "qa": en_qa, "headline": en_headline},
             "zh": {"prose": zh_prose, "bullets": zh_bullets, "kv": zh_kv, "chat": zh_chat, "headline": zh_headline}}
RESERVED = {"en": "bullets", "zh": "chat"}
