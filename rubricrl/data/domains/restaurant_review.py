"""Restaurant reviews: total bill vs per-person price vs tip, food vs service rating, waiting time
in minutes (or hours), the reviewer vs their companion."""

from __future__ import annotations

from rubricrl.data.domains import values as v
from rubricrl.data.domains.base import Conv, Field, bullets, lines, prose

NAME = "restaurant_review"
TOPICS = {"en": ("restaurant review", "dining review", "review"), "zh": ("餐厅点评", "探店笔记", "用餐评价")}
CUISINES = ("chinese", "japanese", "italian", "mexican", "indian", "french", "korean")

FIELDS = [
    Field("restaurant", "text", ("restaurant", "restaurant_name", "venue"), ("Name of the restaurant", "餐厅名称"), p_schema=0.8),
    Field("cuisine", "enum", ("cuisine", "cuisine_type", "food_type"), ("Type of cuisine", "菜系"), p_schema=0.45, enum=CUISINES),
    Field("area", "text", ("neighborhood", "district", "location"), ("Where it is", "所在区域"), p_absent=0.3, p_schema=0.4),
    Field("visit_date", "date", ("visit_date", "visited_on", "date_of_visit"), ("Date of the visit", "就餐日期"),
          p_absent=0.45, p_schema=0.4),
    Field("party_size", "int", ("party_size", "guests", "number_of_diners"), ("How many people ate", "就餐人数"),
          p_absent=0.3, p_schema=0.45),
    Field("dishes", "list", ("dishes", "dishes_ordered", "ordered_items"), ("Dishes ordered", "点的菜"), p_absent=0.1, p_schema=0.6),
    Field("total", "money", ("total_bill", "bill_total", "total_spent"), ("Total paid for the table", "总消费"),
          p_absent=0.3, p_schema=0.55),
    Field("per_person", "money", ("price_per_person", "cost_per_head", "avg_spend_per_person"), ("Cost per person", "人均消费"),
          p_absent=0.35, p_schema=0.45),
    Field("tip", "money", ("tip", "tip_amount", "gratuity"), ("Tip left", "小费"), p_absent=0.55, p_schema=0.2),
    Field("wait", "qty", ("wait_time", "waiting_time", "wait_minutes"), ("How long they waited for a table", "排队时间"),
          p_absent=0.4, p_schema=0.4, conv=(Conv(("wait_hours", "wait_time_h"), 1 / 60, ("hours", "小时"), False, "min"),)),
    Field("food_rating", "rating", ("food_rating", "food_score", "taste_rating"), ("Rating of the food", "口味评分"),
          p_absent=0.25, p_schema=0.5),
    Field("service_rating", "rating", ("service_rating", "service_score"), ("Rating of the service", "服务评分"),
          p_absent=0.35, p_schema=0.35),
    Field("sentiment", "enum", ("sentiment", "overall_sentiment", "overall_impression"), ("Overall impression", "总体评价"),
          p_schema=0.5, enum=("positive", "negative", "mixed")),
    Field("would_return", "bool", ("would_return", "will_return", "returning"), ("Whether the reviewer would go back", "是否会再去"),
          p_absent=0.35, p_schema=0.35),
    Field("reservation", "bool", ("had_reservation", "reserved", "booked_ahead"), ("Whether they had booked", "是否提前预订"),
          p_absent=0.5, p_schema=0.25),
    Field("reviewer", "text", ("reviewer", "author", "reviewer_name"), ("Who wrote the review", "评价人"), p_absent=0.4, p_schema=0.3),
    Field("companion", "text", ("companion", "dined_with"), ("Who they ate with", "同行人"), p_absent=0.55, p_schema=0.15),
]

DISTRACTORS = {"total": [("per_person", "neighbouring_value"), ("tip", "neighbouring_value")],
               "per_person": [("total", "neighbouring_value")],
               "food_rating": [("service_rating", "neighbouring_value")],
               "service_rating": [("food_rating", "neighbouring_value")],
               "reviewer": [("companion", "two_people")]}

NEAR = {
    "en": {"wait": ["There was a bit of a wait, but it moved quickly."], "total": ["The bill was reasonable for the quality."],
           "service_rating": ["Service was friendly enough."], "visit_date": ["We went on a weekday evening."]},
    "zh": {"wait": ["排了一会儿队，不算太久。"], "total": ["价格对得起品质。"], "service_rating": ["服务还算热情。"],
           "visit_date": ["工作日晚上去的。"]},
}

PLACES = {"en": [("Trattoria Lucia", "italian", ["cacio e pepe", "burrata", "tiramisu", "osso buco"]),
                 ("Sakura Ramen House", "japanese", ["tonkotsu ramen", "gyoza", "karaage", "matcha pudding"]),
                 ("El Camino Taqueria", "mexican", ["al pastor tacos", "elote", "churros", "carne asada"]),
                 ("Golden Lotus", "chinese", ["soup dumplings", "Peking duck", "mapo tofu", "dan dan noodles"]),
                 ("Spice Route", "indian", ["butter chicken", "garlic naan", "lamb biryani", "mango lassi"]),
                 ("Le Petit Bistro", "french", ["steak frites", "French onion soup", "crème brûlée", "duck confit"])],
          "zh": [("蜀香园川菜馆", "chinese", ["水煮鱼", "回锅肉", "麻婆豆腐", "夫妻肺片"]),
                 ("小龙坎火锅", "chinese", ["毛肚", "鸭血", "嫩牛肉", "虾滑"]),
                 ("鮨一日料", "japanese", ["三文鱼刺身", "鳗鱼饭", "天妇罗", "寿喜锅"]),
                 ("意味西餐厅", "italian", ["海鲜意面", "玛格丽特披萨", "提拉米苏", "凯撒沙拉"]),
                 ("汉拿山韩式烤肉", "korean", ["烤五花肉", "石锅拌饭", "部队锅", "冷面"])]}
AREAS = {"en": ("downtown", "the Mission District", "Capitol Hill", "the West Village", "South Congress"),
         "zh": ("三里屯", "新天地", "春熙路", "天河城", "西湖边")}


def sample(rng, lang):
    name, cuisine, menu = rng.choice(PLACES[lang])
    sentiment = rng.choice(["positive", "positive", "mixed", "negative"])
    good, bad = {"positive": ([4.5, 5], [4, 4.5, 5]), "mixed": ([4, 4.5], [2, 2.5, 3]), "negative": ([2, 2.5], [1.5, 2, 3])}[sentiment]
    party = rng.choice([2, 2, 3, 4, 6])
    per_person = float(rng.choice([28, 35, 42, 55, 64, 80])) if lang == "en" else float(rng.choice([85, 120, 150, 180, 260]))
    reviewer, companion = v.people(rng, lang, 2)
    facts = {
        "restaurant": v.text(name), "cuisine": v.flag(cuisine), "area": v.text(rng.choice(AREAS[lang])),
        "visit_date": v.date(rng, *v.random_date(rng, rng.choice([2025, 2026])), lang, weekday=rng.random() < 0.3),
        "party_size": v.count(party, lang == "zh" and rng.random() < 0.5),
        "dishes": v.items(rng, rng.sample(menu, rng.randint(2, 3)), lang),
        "total": v.money(rng, per_person * party + rng.choice([0, 6, 12]), lang),
        "per_person": v.money(rng, per_person, lang),
        "wait": v.qty(rng, rng.choice([15, 20, 30, 45, 60, 90]), "min", lang),
        "food_rating": v.rating(rng, rng.choice(good), 5, lang), "service_rating": v.rating(rng, rng.choice(bad), 5, lang),
        "sentiment": v.flag(sentiment), "would_return": v.flag(sentiment == "positive"),
        "reservation": v.flag(rng.random() < 0.5), "reviewer": v.text(reviewer), "companion": v.text(companion),
    }
    if lang == "en":
        facts["tip"] = v.money(rng, round(per_person * party * rng.choice([0.15, 0.18, 0.2])), lang)
    if facts["food_rating"].value == facts["service_rating"].value:  # two equal ratings would hide which is which
        facts["service_rating"] = v.rating(rng, max(1.0, facts["food_rating"].value - 1), 5, lang)
    return facts


_VERDICT_EN = {"positive": ["We loved it.", "One of the best meals I've had this year."],
               "mixed": ["Great food, let down by the service.", "A mixed experience overall."],
               "negative": ["Sadly, a disappointing night.", "I left unhappy."]}
_VERDICT_ZH = {"positive": ["总体非常满意。", "强烈推荐！"], "mixed": ["菜不错，服务拖后腿。", "体验一般，有好有坏。"],
               "negative": ["整体很失望。", "踩雷了。"]}
_RETURN_EN = {True: ["We'll definitely be back."], False: ["I won't be going back."]}
_RETURN_ZH = {True: ["下次还会再来。"], False: ["不会再去了。"]}
_CUISINE_EN = {c: [f"It's {'an' if c[0] in 'aeiou' else 'a'} {c.capitalize()} place."] for c in CUISINES}
_CUISINE_ZH = {"chinese": ["这是一家中餐馆。"], "japanese": ["是家日料店。"], "italian": ["主打意大利菜。"], "korean": ["是家韩餐馆。"]}


def _money_en(r):
    return [r.line("total", "The bill came to {total} for the table, about {per_person} a head.", "We paid {total} in total."),
            r.line("per_person", "Expect around {per_person} per person.", "It works out to {per_person} per person."),
            r.line("tip", "We left a {tip} tip.")]


def _money_zh(r):
    return [r.line("total", "一共消费{total}，人均{per_person}。", "总共花了{total}。"), r.line("per_person", "人均{per_person}。")]


def en_prose(r):
    return prose([
        r.say("Went to {restaurant} in {area} on {visit_date}.", "Finally tried {restaurant} in {area}.",
              "Dinner at {restaurant} last week."),
        r.by_value("cuisine", _CUISINE_EN), r.line("area", "It's tucked away in {area}."),
        r.line("companion", "I went with my friend {companion}.", "{companion} and I shared everything."),
        r.line("party_size", "We were a party of {party_size}."),
        r.by_value("reservation", {True: ["We had booked a table."], False: ["We walked in without a reservation."]}),
        r.line("wait", "We waited {wait} for a table.", "The wait was about {wait}."),
        r.line("dishes", "We ordered {dishes}.", "Highlights: {dishes}."),
        r.line("food_rating", "I'd rate the food {food_rating} and the service {service_rating}.", "Food: {food_rating}."),
        r.line("service_rating", "Service: {service_rating}."),
        *_money_en(r), r.line("visit_date", "(Visited {visit_date}.)"), r.by_value("sentiment", _VERDICT_EN),
        r.by_value("would_return", _RETURN_EN), r.line("reviewer", "- {reviewer}"),
    ], "en")


def en_bullets(r):
    return lines([
        r.say("{restaurant} ({area}) - my notes", "{restaurant}: quick review"), r.by_value("sentiment", _VERDICT_EN),
        *bullets([r.by_value("cuisine", {c: [f"Cuisine: {c}"] for c in CUISINES}), r.line("area", "Area: {area}"),
                  r.line("visit_date", "Visited: {visit_date}", near=("Visited: a weekday evening",)),
                  r.line("party_size", "Party of {party_size}"),
                  r.line("wait", "Wait: {wait}", near=("Wait: short",)), r.line("dishes", "Ordered: {dishes}"),
                  r.line("food_rating", "Food: {food_rating}"), r.line("service_rating", "Service: {service_rating}"),
                  r.line("total", "Bill: {total}"), r.line("per_person", "Per person: {per_person}"), r.line("tip", "Tip: {tip}"),
                  r.by_value("reservation", {True: ["Booked ahead"], False: ["No reservation"]}),
                  r.line("companion", "With: {companion}")], r.pick(["- ", "* "])),
        r.by_value("would_return", _RETURN_EN), r.line("reviewer", "Reviewer: {reviewer}"),
    ])


def en_kv(r):
    return lines([
        r.say("Restaurant: {restaurant}"), r.by_value("cuisine", {c: [f"Cuisine: {c}"] for c in CUISINES}),
        r.line("area", "Neighborhood: {area}"), r.line("visit_date", "Date of visit: {visit_date}"),
        r.line("party_size", "Guests: {party_size}"), r.line("dishes", "Dishes: {dishes}"), r.line("total", "Total: {total}"),
        r.line("per_person", "Per head: {per_person}"), r.line("tip", "Tip: {tip}"), r.line("wait", "Wait: {wait}"),
        r.line("food_rating", "Food rating: {food_rating}"),
        r.line("service_rating", "Service rating: {service_rating}", near=("Service rating: -",)),
        r.by_value("reservation", {True: ["Reservation: yes"], False: ["Reservation: no"]}),
        r.by_value("would_return", {True: ["Would return: yes"], False: ["Would return: no"]}),
        r.line("reviewer", "Reviewer: {reviewer}"), r.line("companion", "Dining companion: {companion}"),
        "Summary: " + r.by_value("sentiment", _VERDICT_EN),
    ])


def en_qa(r):
    return lines([
        r.say("We asked a regular about {restaurant}"), r.by_value("cuisine", _CUISINE_EN), r.line("area", "Q: Where is it? A: In {area}."),
        r.line("visit_date", "Q: When did you last go? A: {visit_date}."), r.line("party_size", "Q: How many of you? A: {party_size}."),
        r.line("companion", "Q: Who did you go with? A: {companion}."), r.line("dishes", "Q: What should I order? A: {dishes}."),
        r.line("wait", "Q: Is there a queue? A: We waited {wait}.", near=("Q: Is there a queue? A: A short one.",)),
        r.line("total", "Q: How much did you spend? A: {total} for everyone.",
               near=("Q: How much did you spend? A: Fair for the quality.",)),
        r.line("per_person", "Q: Per person? A: Roughly {per_person}."), r.line("tip", "Q: Tip? A: {tip}."),
        r.line("food_rating", "Q: Food score? A: {food_rating}."), r.line("service_rating", "Q: Service? A: {service_rating}."),
        "Q: Verdict? A: " + r.by_value("sentiment", _VERDICT_EN) if r.has("sentiment") else "",
        r.by_value("would_return", _RETURN_EN), r.line("reviewer", "(Answers from {reviewer})"),
    ])


def en_headline(r):
    title = r.by_value("sentiment", {"positive": ["A new favourite", "Worth the hype"], "mixed": ["Good food, shaky service"],
                                     "negative": ["Skip this one", "Overpriced and underwhelming"]})
    return lines([f"{title}{r.line('food_rating', ' - food {food_rating}')}", prose([
        r.say("{restaurant} has been on my list for months.", "I finally made it to {restaurant}."), r.line("area", "It's in {area}."),
        r.by_value("cuisine", _CUISINE_EN), r.line("wait", "Even on a weeknight we waited {wait}."),
        r.line("dishes", "We shared {dishes}."), r.line("service_rating", "Service gets {service_rating} from me."), *_money_en(r),
        r.line("companion", "{companion} agreed with me on everything."), r.by_value("would_return", _RETURN_EN),
        r.line("visit_date", "Visited on {visit_date}.")], "en"), r.line("reviewer", "Posted by {reviewer}")])


def zh_prose(r):
    return prose([
        r.say("{visit_date}去了{area}的{restaurant}。", "终于打卡了{restaurant}。", "周末和朋友去了{restaurant}。"),
        r.by_value("cuisine", _CUISINE_ZH), r.line("area", "店在{area}。"), r.line("companion", "和{companion}一起去的。"),
        r.line("party_size", "一共{party_size}个人。"),
        r.by_value("reservation", {True: ["提前订了位。"], False: ["没有预订，直接去的。"]}),
        r.line("wait", "排队等了{wait}。"), r.line("dishes", "点了{dishes}。"), r.line("food_rating", "口味{food_rating}。"),
        r.line("service_rating", "服务{service_rating}。"), *_money_zh(r), r.line("visit_date", "（{visit_date}到店）"),
        r.by_value("sentiment", _VERDICT_ZH), r.by_value("would_return", _RETURN_ZH), r.line("reviewer", "——{reviewer}"),
    ], "zh")


def zh_bullets(r):
    return lines([
        r.say("【{restaurant}探店】", "{restaurant}｜{area}"), r.by_value("cuisine", _CUISINE_ZH), *bullets([
            r.line("area", "位置：{area}"), r.line("visit_date", "时间：{visit_date}", near=("时间：工作日晚上",)),
            r.line("party_size", "人数：{party_size}人"), r.line("wait", "排队：{wait}", near=("排队：不久",)),
            r.line("dishes", "必点：{dishes}"), r.line("food_rating", "口味：{food_rating}"), r.line("service_rating", "服务：{service_rating}"),
            r.line("total", "总价：{total}"), r.line("per_person", "人均：{per_person}"),
            r.by_value("reservation", {True: ["已预订"], False: ["未预订"]}), r.line("companion", "同行：{companion}")],
            r.pick(["· ", "- ", "✅ "])),
        r.by_value("sentiment", _VERDICT_ZH), r.by_value("would_return", _RETURN_ZH), r.line("reviewer", "by {reviewer}"),
    ])


def zh_kv(r):
    sep = r.pick(["：", ": "])
    rows = [("餐厅", r.say("{restaurant}")),
            ("菜系", r.by_value("cuisine", {"chinese": ["中餐"], "japanese": ["日料"], "italian": ["西餐"], "korean": ["韩餐"]})),
            ("商圈", r.line("area", "{area}")), ("日期", r.line("visit_date", "{visit_date}")), ("人数", r.line("party_size", "{party_size}")),
            ("菜品", r.line("dishes", "{dishes}")), ("总价", r.line("total", "{total}")), ("人均", r.line("per_person", "{per_person}")),
            ("等位", r.line("wait", "{wait}")), ("口味", r.line("food_rating", "{food_rating}")),
            ("服务", r.line("service_rating", "{service_rating}", near=("还行",))),
            ("预订", r.by_value("reservation", {True: ["是"], False: ["否"]})),
            ("回头", r.by_value("would_return", {True: ["会"], False: ["不会"]})),
            ("点评人", r.line("reviewer", "{reviewer}")), ("同行", r.line("companion", "{companion}")),
            ("总结", r.by_value("sentiment", _VERDICT_ZH))]
    return lines([f"{k}{sep}{t}" for k, t in rows if t])


def zh_qa(r):
    return lines([
        r.say("{restaurant}值不值得去？来听听食客怎么说"), r.by_value("cuisine", _CUISINE_ZH), r.line("area", "问：在哪？答：{area}。"),
        r.line("visit_date", "问：什么时候去的？答：{visit_date}。"), r.line("party_size", "问：几个人？答：{party_size}个。"),
        r.line("companion", "问：和谁去的？答：{companion}。"), r.line("dishes", "问：推荐什么？答：{dishes}。"),
        r.line("wait", "问：要排队吗？答：等了{wait}。", near=("问：要排队吗？答：排了一会儿。",)),
        r.line("total", "问：花了多少？答：一共{total}。", near=("问：花了多少？答：价格合理。",)),
        r.line("per_person", "问：人均呢？答：{per_person}左右。"), r.line("food_rating", "问：口味打几分？答：{food_rating}。"),
        r.line("service_rating", "问：服务呢？答：{service_rating}。"),
        "问：总体感觉？答：" + r.by_value("sentiment", _VERDICT_ZH) if r.has("sentiment") else "",
        r.by_value("would_return", _RETURN_ZH), r.line("reviewer", "（受访食客：{reviewer}）"),
    ])


def zh_headline(r):
    title = r.by_value("sentiment", {"positive": ["宝藏店铺，强推！", "名不虚传"], "mixed": ["好吃但服务一般"], "negative": ["避雷！", "性价比太低"]})
    return lines([f"{title}{r.line('food_rating', '（口味{food_rating}）')}", prose([
        r.say("关注{restaurant}很久了。", "终于吃上了{restaurant}。"), r.line("area", "店开在{area}。"), r.by_value("cuisine", _CUISINE_ZH),
        r.line("wait", "工作日也排了{wait}。"), r.line("dishes", "点了{dishes}。"), r.line("service_rating", "服务给{service_rating}。"),
        *_money_zh(r), r.line("companion", "{companion}也觉得不错。"), r.by_value("would_return", _RETURN_ZH),
        r.line("visit_date", "到店日期：{visit_date}。")], "zh"), r.line("reviewer", "发布者：{reviewer}")])


TEMPLATES = {"en": {"prose": en_prose, "bullets": en_bullets, "kv": en_kv, "qa": en_qa, "headline": en_headline},
             "zh": {"prose": zh_prose, "bullets": zh_bullets, "kv": zh_kv, "qa": zh_qa, "headline": zh_headline}}
RESERVED = {"en": "kv", "zh": "bullets"}
