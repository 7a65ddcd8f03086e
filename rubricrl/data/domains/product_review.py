"""Product reviews (electronics and appliances): price vs old price and shipping, battery and
weight with unit conversions, pros/cons lists, sentiment."""

from __future__ import annotations

from rubricrl.data.domains import values as v
from rubricrl.data.domains.base import Conv, Field, bullets, lines, prose

NAME = "product_review"
TOPICS = {"en": ("product review", "customer review", "review"), "zh": ("商品评价", "用户评价", "测评")}

FIELDS = [
    Field("product", "text", ("product", "product_name", "item", "model"), ("Product name", "商品名称"),
          p_schema=0.8),
    Field("brand", "text", ("brand", "manufacturer", "maker"), ("Brand", "品牌"), p_schema=0.4,
          implied_by=("product",)),
    Field("price", "money", ("price", "price_paid", "current_price", "purchase_price", "sale_price"),
          ("Price the reviewer paid", "实际购买价格"), p_absent=0.25, p_schema=0.8,
          conv=(Conv(("price_cents", "price_in_cents"), 100, ("cents", "美分"), True, "USD"),)),
    Field("old_price", "money", ("original_price", "list_price", "was_price"), ("Price before the discount", "原价"),
          p_absent=0.45, p_schema=0.2, requires="price"),
    Field("shipping_fee", "money", ("shipping_fee", "delivery_fee", "shipping_cost"), ("Shipping cost", "运费"),
          p_absent=0.5, p_schema=0.3),
    Field("rating", "rating", ("rating", "stars", "score", "overall_rating"), ("Star rating", "评分"),
          p_absent=0.2, p_schema=0.6),
    Field("battery_life", "qty", ("battery_life", "battery", "battery_runtime"), ("Battery life", "续航时间"),
          p_absent=0.4, p_schema=0.55,
          conv=(Conv(("battery_minutes", "battery_life_min"), 60, ("minutes", "分钟"), True, "h"),
                Conv(("battery_hours", "battery_life_h"), 1 / 60, ("hours", "小时"), False, "min"))),
    Field("charge_time", "qty", ("charging_time", "charge_time"), ("Time to charge fully", "充电时间"),
          p_absent=0.6, p_schema=0.15),
    Field("weight", "qty", ("weight", "item_weight", "net_weight"), ("Weight", "重量"), p_absent=0.45, p_schema=0.45,
          conv=(Conv(("weight_g", "weight_grams"), 1000, ("grams", "克"), True, "kg"),
                Conv(("weight_kg",), 0.001, ("kilograms", "千克"), False, "g"))),
    Field("pros", "list", ("pros", "positives", "liked", "advantages"), ("What the reviewer liked", "优点"),
          p_absent=0.15, p_schema=0.5),
    Field("cons", "list", ("cons", "negatives", "complaints", "drawbacks"), ("What the reviewer disliked", "缺点"),
          p_absent=0.35, p_schema=0.45),
    Field("sentiment", "enum", ("sentiment", "overall_sentiment", "verdict"), ("Overall sentiment", "整体情感倾向"),
          p_schema=0.5, enum=("positive", "negative", "mixed")),
    Field("recommend", "bool", ("would_recommend", "recommended", "recommends_it"),
          ("Whether the reviewer recommends it", "是否推荐"), p_absent=0.4, p_schema=0.35),
    Field("purchase_date", "date", ("purchase_date", "bought_on", "order_date"), ("Date of purchase", "购买日期"),
          p_absent=0.5, p_schema=0.3),
    Field("reviewer", "text", ("reviewer", "reviewer_name", "author"), ("Who wrote the review", "评价人"),
          p_absent=0.4, p_schema=0.3),
    Field("friend", "text", ("friend",), ("", ""), p_absent=0.6, p_schema=0),
    Field("store", "text", ("store", "retailer", "bought_from", "platform"), ("Where it was bought", "购买渠道"),
          p_absent=0.35, p_schema=0.3),
]

DISTRACTORS = {"price": [("old_price", "old_vs_new_value"), ("shipping_fee", "neighbouring_value")],
               "battery_life": [("charge_time", "neighbouring_value")],
               "reviewer": [("friend", "two_people")]}

NEAR = {
    "en": {"price": ["The price felt fair for what you get.", "It isn't cheap, but I think it's worth the money."],
           "battery_life": ["Battery life has been fine for my commute, though I never timed it.",
                            "I can't say exactly how long the battery lasts, but I rarely think about it."],
           "weight": ["It feels light enough to carry around all day.", "It's on the heavy side, honestly."],
           "shipping_fee": ["Delivery was quick and the box arrived intact."],
           "purchase_date": ["I bought it a little while ago."]},
    "zh": {"price": ["价格我觉得还算合理。", "不算便宜，但物有所值。"],
           "battery_life": ["续航应付日常通勤没问题，具体多久没算过。", "电池能用多久说不准，反正很少担心没电。"],
           "weight": ["拿在手里挺轻的。", "说实话有点沉。"],
           "shipping_fee": ["物流很快，包装完好。"],
           "purchase_date": ["前段时间入手的。"]},
}

# category: ((brand, model) per language, price range, battery (unit, lo, hi) or None, weight, pros, cons)
CATALOG = {
    "headphones": {
        "en": [("Sony", "WH-1000XM5"), ("Bose", "QuietComfort Ultra"),
               ("Sennheiser", "Momentum 4 Wireless"), ("Anker", "Soundcore Space Q45")],
        "zh": [("索尼", "WH-1000XM5"), ("华为", "FreeBuds Pro 3"), ("漫步者", "W820NB"),
               ("小米", "Buds 4 Pro")],
        "price": (79, 549), "battery": ("h", 20, 60), "weight": ("g", 240, 390),
        "pros": {"en": ["excellent noise cancelling", "comfortable ear cups", "clear call quality",
                        "solid companion app", "rich bass"],
                 "zh": ["降噪效果好", "佩戴舒适", "通话清晰", "音质饱满", "连接稳定"]},
        "cons": {"en": ["the case feels cheap", "touch controls are finicky", "they get warm after an hour"],
                 "zh": ["耳罩有点闷", "触控不灵敏", "收纳盒做工一般"]}},
    "laptop": {
        "en": [("Lenovo", "ThinkPad X1 Carbon"), ("Dell", "XPS 14"), ("Apple", "MacBook Air 15"),
               ("ASUS", "Zenbook 14 OLED")],
        "zh": [("联想", "小新 Pro 16"), ("华为", "MateBook 14"), ("荣耀", "MagicBook X16"), ("小米", "Redmi Book 16")],
        "price": (699, 2399), "battery": ("h", 8, 22), "weight": ("kg", 1.1, 2.4),
        "pros": {"en": ["bright display", "great keyboard", "fast performance", "quiet fans"],
                 "zh": ["屏幕素质高", "键盘手感好", "性能强", "风扇安静"]},
        "cons": {"en": ["only two USB ports", "the webcam is grainy", "the speakers are tinny"],
                 "zh": ["接口太少", "摄像头画质差", "外放音质一般"]}},
    "vacuum": {
        "en": [("iRobot", "Roomba j7+"), ("Roborock", "S8 Pro Ultra"), ("Eufy", "RoboVac X8"), ("Shark", "AI Ultra")],
        "zh": [("石头", "P10"), ("科沃斯", "T20"), ("追觅", "L10s"), ("云鲸", "J4")],
        "price": (299, 1399), "battery": ("min", 90, 180), "weight": ("kg", 3.2, 4.9),
        "pros": {"en": ["strong suction", "accurate room mapping", "quiet mode", "easy scheduling"],
                 "zh": ["吸力强", "建图准确", "噪音小", "App 操作方便"]},
        "cons": {"en": ["it gets stuck under the sofa", "the bin is small", "the mop leaves streaks"],
                 "zh": ["容易卡在沙发底下", "尘盒偏小", "拖地有水痕"]}},
    "kitchen": {
        "en": [("Ninja", "Foodi AF161"), ("Breville", "Barista Express"), ("Philips", "Airfryer XXL"),
               ("Cuisinart", "DGB-900")],
        "zh": [("美的", "KZE5004"), ("九阳", "Y1"), ("小熊", "DFB-B30"), ("苏泊尔", "SY-50YC")],
        "price": (89, 699), "battery": None, "weight": ("kg", 4.2, 9.8),
        "pros": {"en": ["it heats up fast", "easy to clean", "consistent results", "sturdy build"],
                 "zh": ["加热快", "好清洗", "做出来口感稳定", "做工扎实"]},
        "cons": {"en": ["it takes a lot of counter space", "the manual is confusing", "the fan is loud"],
                 "zh": ["占地方", "说明书看不懂", "噪音偏大"]}},
}
STORES = {"en": ("Amazon", "Best Buy", "Walmart", "Target", "Costco", "B&H Photo"),
          "zh": ("京东", "天猫", "拼多多", "苏宁易购", "官方旗舰店")}


def sample(rng, lang):
    cat = CATALOG[rng.choice(list(CATALOG))]
    brand, model = rng.choice(cat[lang])
    sentiment = rng.choice(["positive", "positive", "mixed", "negative"])
    stars = {"positive": [4, 4.5, 5], "mixed": [3, 3.5], "negative": [1, 1.5, 2, 2.5]}[sentiment]
    price = float(rng.randint(*cat["price"]) - rng.choice([0, 0, 0.01, 0.05]))
    if lang == "zh":
        price = float(round(price * 7, -1) - rng.choice([0, 1, 10]))
    facts = {
        "product": v.text(f"{brand} {model}" if lang == "en" else f"{brand}{model}"),
        "brand": v.text(brand),
        "price": v.money(rng, price, lang),
        "old_price": v.money(rng, round(price * rng.choice([1.15, 1.2, 1.25, 1.3]), -1) - 0.01 * (price % 1 > 0), lang),
        "shipping_fee": v.money(rng, rng.choice([4.99, 5.99, 9.95, 12]) if lang == "en" else rng.choice([8, 10, 15, 20]),
                                lang),
        "rating": v.rating(rng, rng.choice(stars), 5, lang),
        "pros": v.items(rng, rng.sample(cat["pros"][lang], rng.randint(1, 3)), lang),
        "cons": v.items(rng, rng.sample(cat["cons"][lang], rng.randint(1, 2)), lang),
        "sentiment": v.flag(sentiment),
        "recommend": v.flag(sentiment == "positive" or (sentiment == "mixed" and rng.random() < 0.5)),
        "purchase_date": v.date(rng, *v.random_date(rng, rng.choice([2025, 2026])), lang),
        "store": v.text(rng.choice(STORES[lang])),
    }
    facts["reviewer"], facts["friend"] = (v.text(p) for p in v.people(rng, lang, 2))
    if cat["battery"]:
        unit, lo, hi = cat["battery"]
        # Minutes in steps of 6 so that a conversion to hours is exact (132 min = 2.2 h).
        life = rng.randint(lo, hi) + rng.choice([0, 0.5]) if unit == "h" else rng.randrange(lo, hi, 6)
        facts["battery_life"] = v.qty(rng, life, unit, lang)
        facts["charge_time"] = v.qty(rng, rng.choice([1.5, 2, 2.5, 3]), "h", lang)
    unit, lo, hi = cat["weight"]
    w = rng.randint(lo, hi) if unit == "g" else round(rng.uniform(lo, hi), 1)
    facts["weight"] = v.qty(rng, w, unit, lang)
    return facts


def _verdict_en(r):
    return [r.by_value("sentiment", {"positive": ["Overall I'm really happy with it.", "All in all, a great buy."],
                                     "mixed": ["Overall it's a mixed bag.", "Good in some ways, frustrating in others."],
                                     "negative": ["Honestly, I regret buying it.", "Overall it was a disappointment."]}),
            r.by_value("recommend", {True: ["I'd recommend it to friends.", "Would buy again."],
                                     False: ["I wouldn't recommend it.", "I can't recommend it."]})]


def _verdict_zh(r):
    return [r.by_value("sentiment", {"positive": ["总体非常满意。", "总的来说，值得买。"],
                                     "mixed": ["总体来说有好有坏。", "优缺点都很明显。"],
                                     "negative": ["说实话，有点后悔买了。", "整体让人失望。"]}),
            r.by_value("recommend", {True: ["推荐购买。", "会推荐给朋友。"], False: ["不推荐。", "不建议大家入手。"]})]


def en_prose(r):
    return prose([
        r.say("I ordered the {product} from {store} on {purchase_date}.", "I picked up the {product} on {purchase_date}.",
              "I've been using the {product} for a few weeks now.", "I finally replaced my old one with the {product}."),
        r.line("friend", "My colleague {friend} had been raving about it, so I gave it a try."),
        r.line("store", "I got it from {store}."),
        r.line("price", "I paid {price}, down from {old_price}, plus {shipping_fee} for shipping.",
               "It was on sale for {price} (the list price is {old_price}).", "I paid {price} for it.",
               "At {price} it wasn't an impulse buy."),
        r.line("old_price", "It used to sell for {old_price}."),
        r.line("shipping_fee", "Shipping added another {shipping_fee}."),
        r.line("battery_life", "The battery lasts about {battery_life} on a full charge.",
               "I'm getting roughly {battery_life} of use between charges."),
        r.line("charge_time", "A full charge takes around {charge_time}."),
        r.line("weight", "It weighs {weight}.", "At {weight}, it's easy to live with."),
        r.line("pros", "What I like: {pros}.", "The highlights for me are {pros}."),
        r.line("cons", "On the downside, {cons}.", "My complaints: {cons}."),
        r.line("rating", "I'd give it {rating}.", "My rating: {rating}."),
        r.line("purchase_date", "I bought it on {purchase_date}."),
        *_verdict_en(r),
        r.line("reviewer", "- {reviewer}", "Posted by {reviewer}"),
    ], "en")


def en_bullets(r):
    head = r.say("Quick review of the {product}", "My take on the {product}", "{product}: the short version")
    body = bullets([
        r.line("price", "Paid: {price} (was {old_price})", "Price: {price}", "Price paid: {price}",
               near=("Price: fair for what you get",)),
        r.line("old_price", "Regular price: {old_price}"),
        r.line("shipping_fee", "Shipping: {shipping_fee}"),
        r.line("store", "Bought at: {store}"), r.line("purchase_date", "Ordered: {purchase_date}"),
        r.line("battery_life", "Battery: {battery_life} per charge", near=("Battery: fine for a day, not measured",)),
        r.line("charge_time", "Charging: about {charge_time}"),
        r.line("weight", "Weight: {weight}"), r.line("pros", "Good: {pros}"), r.line("cons", "Not so good: {cons}"),
        r.line("rating", "Rating: {rating}"),
    ], r.pick(["- ", "* ", "• "]))
    return lines([head, *body, prose(_verdict_en(r), "en"), r.line("reviewer", "Reviewed by {reviewer}")])


def en_qa(r):
    return lines([
        r.say("Q: What did you buy? A: The {product}.", "Q: Which model did you go for? A: The {product}."),
        r.line("store", "Q: Where did you buy it? A: From {store}."),
        r.line("price", "Q: How much did it cost? A: {price}, it was discounted from {old_price}.",
               "Q: How much did you pay? A: {price}.", near=("Q: Was it expensive? A: Not cheap, but worth it.",)),
        r.line("shipping_fee", "Q: Any extra costs? A: Shipping was {shipping_fee}."),
        r.line("battery_life", "Q: How's the battery? A: About {battery_life} per charge.",
               near=("Q: How's the battery? A: Good enough; I never ran it down.",)),
        r.line("charge_time", "Q: And charging? A: Roughly {charge_time} to full."),
        r.line("weight", "Q: Is it heavy? A: It's {weight}."),
        r.line("pros", "Q: What do you like most? A: {pros}."), r.line("cons", "Q: Anything you dislike? A: {cons}."),
        r.line("rating", "Q: Your rating? A: {rating}."), r.line("purchase_date", "Q: When did you buy it? A: {purchase_date}."),
        r.line("friend", "Q: How did you hear about it? A: {friend} showed me theirs."),
        "Q: Final thoughts? A: " + " ".join(p for p in _verdict_en(r) if p) if r.has("sentiment") else "",
        r.line("reviewer", "(Interview with {reviewer})"),
    ])


def en_kv(r):
    return lines([
        r.say("Product: {product}", "Item: {product}"),
        r.line("reviewer", "Reviewer: {reviewer}"), r.line("store", "Retailer: {store}"),
        r.line("purchase_date", "Purchased: {purchase_date}"), r.line("price", "Price paid: {price}", "Sale price: {price}"),
        r.line("old_price", "List price: {old_price}"), r.line("shipping_fee", "Shipping: {shipping_fee}"),
        r.line("battery_life", "Battery life: {battery_life}", near=("Battery life: not tested",)),
        r.line("charge_time", "Charge time: {charge_time}"), r.line("weight", "Weight: {weight}"),
        r.line("rating", "Stars: {rating}"), r.line("pros", "Pros: {pros}"), r.line("cons", "Cons: {cons}"),
        "Comments: " + prose([r.line("friend", "Recommended to me by {friend}."), *_verdict_en(r)], "en"),
    ])


def en_headline(r):
    title = r.by_value("sentiment", {"positive": ["Worth every penny", "Exceeded my expectations"],
                                     "mixed": ["Good, but not great", "Some hits, some misses"],
                                     "negative": ["Disappointed", "Not what I hoped for"]})
    return lines([
        title + r.line("rating", " ({rating})"),
        prose([r.say("I bought the {product} after a lot of research.", "I've had the {product} for about a month."),
               r.line("price", "I got it for {price} when it dropped from {old_price}.", "It cost {price}."),
               r.line("shipping_fee", "Delivery cost {shipping_fee}."),
               r.line("store", "Ordered through {store}."), r.line("purchase_date", "Ordered it on {purchase_date}."),
               r.line("pros", "The good: {pros}."), r.line("cons", "The bad: {cons}."),
               r.line("battery_life", "Battery is around {battery_life}."), r.line("charge_time", "Charging takes {charge_time}."),
               r.line("weight", "It weighs {weight}."),
               r.line("friend", "Thanks to {friend} for the tip."), *_verdict_en(r)], "en"),
        r.line("reviewer", "Verified buyer: {reviewer}"),
    ])


def zh_prose(r):
    return prose([
        r.say("{purchase_date}在{store}下单了{product}。", "入手{product}快一个月了，说说感受。", "用了一段时间{product}，来评价一下。"),
        r.line("friend", "是同事{friend}推荐的。"), r.line("store", "在{store}买的。"),
        r.line("price", "到手价{price}，原价{old_price}，运费{shipping_fee}。", "活动价{price}，之前要{old_price}。",
               "花了{price}。"),
        r.line("old_price", "原价是{old_price}。"), r.line("shipping_fee", "另付运费{shipping_fee}。"),
        r.line("battery_life", "续航大概{battery_life}。", "充满电能用{battery_life}左右。"),
        r.line("charge_time", "充满需要{charge_time}。"), r.line("weight", "重量{weight}。"),
        r.line("pros", "优点：{pros}。", "喜欢的地方是{pros}。"), r.line("cons", "缺点：{cons}。", "不足是{cons}。"),
        r.line("rating", "给{rating}。"),
        r.line("purchase_date", "购买时间是{purchase_date}。"), *_verdict_zh(r), r.line("reviewer", "——{reviewer}"),
    ], "zh")


def zh_bullets(r):
    head = r.say("【{product}使用体验】", "{product}简评：", "说几点{product}的感受：")
    body = bullets([
        r.line("price", "价格：{price}（原价{old_price}）", "价格：{price}", near=("价格：还算合理",)),
        r.line("old_price", "原价：{old_price}"), r.line("shipping_fee", "运费：{shipping_fee}"),
        r.line("store", "购买渠道：{store}"), r.line("purchase_date", "下单日期：{purchase_date}"),
        r.line("battery_life", "续航：{battery_life}", near=("续航：够用，没具体测",)),
        r.line("charge_time", "充电：约{charge_time}"), r.line("weight", "重量：{weight}"),
        r.line("pros", "优点：{pros}"), r.line("cons", "缺点：{cons}"), r.line("rating", "评分：{rating}"),
    ], r.pick(["- ", "· ", "• "]))
    return lines([head, *body, prose(_verdict_zh(r), "zh"), r.line("reviewer", "评价人：{reviewer}")])


def zh_qa(r):
    return lines([
        r.say("问：买的是什么？答：{product}。", "问：入手了哪款？答：{product}。"),
        r.line("store", "问：在哪买的？答：{store}。"),
        r.line("price", "问：多少钱？答：{price}，原价{old_price}。", "问：花了多少？答：{price}。",
               near=("问：贵吗？答：不便宜，但值。",)),
        r.line("shipping_fee", "问：有运费吗？答：{shipping_fee}。"),
        r.line("battery_life", "问：续航怎么样？答：大约{battery_life}。", near=("问：续航怎么样？答：够用，没测过。",)),
        r.line("charge_time", "问：充电要多久？答：{charge_time}左右。"), r.line("weight", "问：重不重？答：{weight}。"),
        r.line("pros", "问：最满意哪点？答：{pros}。"), r.line("cons", "问：有什么不满意？答：{cons}。"),
        r.line("rating", "问：打几分？答：{rating}。"), r.line("purchase_date", "问：什么时候买的？答：{purchase_date}。"),
        r.line("friend", "问：怎么知道这款的？答：{friend}推荐的。"),
        "问：总体评价？答：" + "".join(_verdict_zh(r)) if r.has("sentiment") else "",
        r.line("reviewer", "（受访用户：{reviewer}）"),
    ])


def zh_kv(r):
    return lines([
        r.say("商品：{product}", "商品名称：{product}"), r.line("reviewer", "用户：{reviewer}"),
        r.line("store", "渠道：{store}"), r.line("purchase_date", "购买日期：{purchase_date}"),
        r.line("price", "成交价：{price}"), r.line("old_price", "原价：{old_price}"), r.line("shipping_fee", "运费：{shipping_fee}"),
        r.line("battery_life", "续航：{battery_life}", near=("续航：未测试",)), r.line("charge_time", "充电时长：{charge_time}"),
        r.line("weight", "重量：{weight}"), r.line("rating", "评分：{rating}"), r.line("pros", "优点：{pros}"),
        r.line("cons", "缺点：{cons}"), "备注：" + prose([r.line("friend", "朋友{friend}推荐。"), *_verdict_zh(r)], "zh"),
    ])


def zh_headline(r):
    title = r.by_value("sentiment", {"positive": ["物超所值！", "超出预期"], "mixed": ["还行，但不完美", "有得有失"],
                                     "negative": ["失望", "踩雷了"]})
    return lines([
        title + r.line("rating", "（{rating}）"),
        prose([r.say("做了很多功课才买的{product}。", "{product}用了一个月了。"),
               r.line("price", "赶上降价，{price}拿下，原价{old_price}。", "价格{price}。"),
               r.line("shipping_fee", "运费{shipping_fee}。"), r.line("store", "在{store}下的单。"),
               r.line("purchase_date", "{purchase_date}下的单。"), r.line("pros", "好的方面：{pros}。"),
               r.line("cons", "不好的方面：{cons}。"), r.line("battery_life", "续航{battery_life}左右。"),
               r.line("charge_time", "充电要{charge_time}。"), r.line("weight", "重量{weight}。"),
               r.line("friend", "感谢{friend}推荐。"), *_verdict_zh(r)], "zh"),
        r.line("reviewer", "已购用户：{reviewer}"),
    ])


TEMPLATES = {"en": {"prose": en_prose, "bullets": en_bullets, "qa": en_qa, "kv": en_kv, "headline": en_headline},
             "zh": {"prose": zh_prose, "bullets": zh_bullets, "qa": zh_qa, "kv": zh_kv, "headline": zh_headline}}
RESERVED = {"en": "qa", "zh": "headline"}
