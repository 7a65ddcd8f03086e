"""Customer-service dialogues (chats, calls, e-mails) and the agent's summaries: customer vs agent,
order total vs refund vs voucher, promised vs new delivery date."""

from __future__ import annotations

from rubricrl.data.domains import values as v
from rubricrl.data.domains.base import Conv, Field, bullets, lines

NAME = "customer_service"
TOPICS = {"en": ("customer-service conversation", "support transcript", "support ticket"),
          "zh": ("客服对话", "客服记录", "售后工单")}
ISSUES = ("late_delivery", "damaged_item", "wrong_item", "billing_error")
RESOLUTIONS = ("refund", "replacement", "voucher", "escalated")

FIELDS = [
    Field("customer_name", "text", ("customer_name", "customer", "caller_name", "client_name"), ("Customer's name", "客户姓名"),
          p_absent=0.25, p_schema=0.7),
    Field("agent_name", "text", ("agent_name", "agent", "representative"), ("Support agent's name", "客服姓名"),
          p_absent=0.3, p_schema=0.3),
    Field("order_id", "text", ("order_id", "order_number", "order_no"), ("Order number", "订单号"), p_absent=0.15),
    Field("product", "text", ("product", "item", "product_name"), ("Product concerned", "涉及商品"), p_absent=0.1),
    Field("issue_type", "enum", ("issue_type", "issue", "problem_category", "complaint_type"), ("Kind of problem", "问题类型"),
          p_schema=0.7, enum=ISSUES),
    Field("order_amount", "money", ("order_total", "order_amount", "amount_paid"), ("What the customer paid", "订单金额"),
          p_absent=0.35, p_schema=0.45),
    Field("refund_amount", "money", ("refund_amount", "refund", "amount_refunded"), ("Amount refunded", "退款金额"),
          p_absent=0.3, p_schema=0.55, conv=(Conv(("refund_cents",), 100, ("cents", "美分"), True, "USD"),)),
    Field("voucher", "money", ("voucher_value", "coupon_amount", "compensation"), ("Goodwill voucher", "补偿优惠券金额"),
          p_absent=0.5, p_schema=0.25),
    Field("old_delivery_date", "date", ("original_delivery_date", "promised_date"), ("Originally promised date", "原定送达日期"),
          p_absent=0.4, p_schema=0.2),
    Field("new_delivery_date", "date", ("new_delivery_date", "expected_delivery", "delivery_date"),
          ("Newly promised delivery date", "新的预计送达日期"), p_absent=0.3, p_schema=0.45),
    Field("resolution", "enum", ("resolution", "outcome", "action_taken"), ("What the agent did", "处理结果"),
          p_schema=0.6, enum=RESOLUTIONS),
    Field("phone", "text", ("callback_number", "phone", "contact_phone"), ("Customer's phone number", "联系电话"),
          p_absent=0.55, p_schema=0.3),
    Field("email", "text", ("email", "contact_email", "customer_email"), ("Customer's e-mail", "邮箱"),
          p_absent=0.6, p_schema=0.25),
    Field("satisfied", "bool", ("customer_satisfied", "satisfied", "happy_with_outcome"),
          ("Whether the customer accepted the outcome", "客户是否满意"), p_absent=0.35, p_schema=0.35),
    Field("ticket_id", "text", ("ticket_id", "case_number", "ticket"), ("Support ticket number", "工单号"),
          p_absent=0.45, p_schema=0.3),
]

DISTRACTORS = {"customer_name": [("agent_name", "two_people")],
               "refund_amount": [("order_amount", "neighbouring_value"), ("voucher", "neighbouring_value")],
               "order_amount": [("refund_amount", "neighbouring_value")],
               "new_delivery_date": [("old_delivery_date", "old_vs_new_value")]}

NEAR = {
    "en": {"refund_amount": ["The exact refund amount will be confirmed by our billing team."],
           "phone": ["You have my number on the account, right?"],
           "new_delivery_date": ["I can't give you a new delivery date yet, but it's been reprioritised."],
           "order_amount": ["I paid for it in full when I ordered."],
           "ticket_id": ["I've opened a case for this."]},
    "zh": {"refund_amount": ["具体退款金额以财务核算为准。"], "phone": ["我的电话账户里有。"],
           "new_delivery_date": ["新的送达时间暂时还定不了，已经给您加急了。"], "order_amount": ["下单的时候已经全额付款了。"],
           "ticket_id": ["已经给您登记了工单。"]},
}

PRODUCTS = {"en": ("Dyson V12 vacuum", "KitchenAid stand mixer", "Nespresso Vertuo machine", "Samsung 55-inch TV",
                   "Garmin Forerunner 265", "Instant Pot Duo", "Logitech MX Master 3S mouse", "IKEA MALM dresser"),
            "zh": ("戴森吹风机", "小米空气净化器", "美的洗碗机", "华为 MatePad 平板", "九阳豆浆机", "飞利浦电动牙刷",
                   "海尔冰箱", "格力空调")}
COMPANIES = {"en": ("ShopRight", "Northwind Home", "BrightCart", "Parcel & Co."), "zh": ("优购商城", "家电直营店", "快选平台")}


def sample(rng, lang):
    issue, resolution = rng.choice(ISSUES), rng.choice(RESOLUTIONS)
    customer, agent = v.people(rng, lang, 2)
    amount = float(rng.randint(39, 899)) - rng.choice([0, 0.01, 0.05])
    if lang == "zh":
        amount = float(rng.randint(199, 6999))
    share = rng.choice([0.5, 0.3, 0.2, 0.15])  # partial refunds: a full one would equal (and give away) the total
    promised = v.random_date(rng, 2026)
    facts = {
        "customer_name": v.text(customer), "agent_name": v.text(agent),
        "order_id": v.text(f"{rng.randint(100, 999)}-{rng.randint(1000000, 9999999)}" if lang == "en"
                           else f"{rng.choice(['JD', 'TB', ''])}{rng.randint(10**11, 10**12 - 1)}"),
        "product": v.text(rng.choice(PRODUCTS[lang])), "issue_type": v.flag(issue),
        "order_amount": v.money(rng, amount, lang), "resolution": v.flag(resolution),
        "old_delivery_date": v.date(rng, *promised, lang),
        "phone": v.text(f"({rng.randint(201, 989)}) 555-{rng.randint(100, 199):04d}" if lang == "en"
                        else f"1{rng.choice([38, 39, 58, 86])}{rng.randint(1000, 9999)}{rng.randint(1000, 9999)}"),
        "email": v.text(f"{customer.split()[0].lower()}.{rng.randint(10, 99)}@{rng.choice(['gmail.com', 'outlook.com'])}"
                        if lang == "en" else f"user{rng.randint(1000, 9999)}@{rng.choice(['qq.com', '163.com'])}"),
        "satisfied": v.flag(rng.random() < 0.7),
        "ticket_id": v.text(f"{rng.choice(['CS', 'TK', 'SR'])}-{rng.randint(10000, 99999)}"),
        "company": v.text(rng.choice(COMPANIES[lang])),
    }
    if resolution == "refund":
        facts["refund_amount"] = v.money(rng, round(amount * share, 2), lang)
    if resolution == "voucher" or rng.random() < 0.3:
        facts["voucher"] = v.money(rng, float(rng.choice([5, 10, 15, 20])) * (6 if lang == "zh" else 1), lang)
    if issue == "late_delivery" or resolution == "replacement":
        facts["new_delivery_date"] = v.date(rng, *v.shift_date(promised, rng.randint(3, 12)), lang)
    return facts


def _turns_en(r, email=False):
    """(speaker, sentence) pairs: C customer, A agent, S the customer's sign-off (e-mails only)."""
    greeting = (("Thank you for contacting {company}. This is {agent_name} from Customer Care.",
                 "Thank you for your message.") if email else
                ("Thanks for contacting {company}, this is {agent_name}. How can I help?",
                 "Hi, you're chatting with {agent_name} from {company}.", "Hello, how can I help you today?"))
    return [
        ("A", r.say(*greeting)),
        ("C", r.by_value("issue_type", {
            "late_delivery": ["My {product} was supposed to arrive on {old_delivery_date} and it still isn't here.",
                              "I'm still waiting for my {product}."],
            "damaged_item": ["My {product} arrived with a cracked housing.", "The {product} came damaged."],
            "wrong_item": ["I ordered a {product} but received something completely different.",
                           "You sent me the wrong item instead of the {product}."],
            "billing_error": ["I was overcharged for my {product}.", "The amount charged for the {product} is wrong."]})),
        ("C", r.line("order_id", "The order number is {order_id}.", "It's order {order_id}.")),
        ("C", r.line("order_amount", "I paid {order_amount} for it.", "The total was {order_amount}.")),
        ("A", r.say("Sorry about that. Can I get your name to pull up the account?", "Let me look into it. Your name, please?")
         if r.has("customer_name") and not email else ""),
        ("S" if email else "C", r.line("customer_name", *(("Best regards,\n{customer_name}", "Thanks,\n{customer_name}")
                                                          if email else ("It's {customer_name}.", "{customer_name}.")))),
        ("C", r.line("email", "The e-mail on the account is {email}.")),
        ("A", r.line("product", "I see the {product} on your account.")),
        ("A", r.line("old_delivery_date", "I can see it was promised for {old_delivery_date}.")),
        ("A", r.line("new_delivery_date", "The new delivery date is {new_delivery_date}.",
                     "Our warehouse says it will now arrive on {new_delivery_date}.")),
        ("A", r.by_value("resolution", {
            "refund": ["I've issued a refund of {refund_amount} to your original payment method.", "I'll process a refund."],
            "replacement": ["I'll send you a replacement at no cost.", "A replacement is on its way."],
            "voucher": ["I've added a {voucher} voucher to your account as an apology.", "I can offer you a voucher."],
            "escalated": ["I'm escalating this to our specialist team; they'll call you back within 48 hours."]})),
        ("A", r.line("refund_amount", "You'll see {refund_amount} back on your card in 3-5 business days.")),
        ("A", r.line("voucher", "I've also added a {voucher} voucher for the trouble.")),
        ("C", r.line("phone", "If you need to call me, my number is {phone}.")),
        ("A", r.line("ticket_id", "Your case number is {ticket_id}.")),
        ("C", "" if email else r.by_value("satisfied", {
            True: ["Great, that works for me. Thank you!", "Perfect, thanks for sorting it out."],
            False: ["Honestly, that's not good enough.", "I'm not happy with this at all."]})),
    ]


def _turns_zh(r, email=False):
    greeting = (("您好，感谢联系{company}，我是客服{agent_name}。", "您好，来信已收到。") if email else
                ("您好，{company}客服{agent_name}为您服务，请问有什么可以帮您？", "您好，我是客服{agent_name}。",
                 "您好，请问有什么可以帮您？"))
    return [
        ("A", r.say(*greeting)),
        ("C", r.by_value("issue_type", {
            "late_delivery": ["我买的{product}说好{old_delivery_date}送到，现在还没到。", "我的{product}一直没收到。"],
            "damaged_item": ["收到的{product}外壳是裂的。", "{product}到手就是坏的。"],
            "wrong_item": ["我买的是{product}，结果发来的东西不对。", "你们发错货了，我要的是{product}。"],
            "billing_error": ["我买{product}被多扣了钱。", "{product}这单扣款金额不对。"]})),
        ("C", r.line("order_id", "订单号是{order_id}。", "单号{order_id}。")),
        ("C", r.line("order_amount", "付了{order_amount}。", "订单金额是{order_amount}。")),
        ("A", r.say("非常抱歉，麻烦提供一下您的姓名。", "我帮您查一下，请问怎么称呼？") if r.has("customer_name") and not email
         else ""),
        ("S" if email else "C", r.line("customer_name", *(("{customer_name}", "客户：{customer_name}") if email
                                                          else ("我叫{customer_name}。", "{customer_name}。")))),
        ("C", r.line("email", "账户邮箱是{email}。")),
        ("A", r.line("product", "查到您购买的{product}了。")),
        ("A", r.line("old_delivery_date", "系统显示原定{old_delivery_date}送达。")),
        ("A", r.line("new_delivery_date", "新的预计送达日期是{new_delivery_date}。", "仓库反馈会在{new_delivery_date}送到。")),
        ("A", r.by_value("resolution", {
            "refund": ["已为您申请退款{refund_amount}，原路退回。", "这边给您办理退款。"],
            "replacement": ["给您免费换一台新的。", "给您补发新品。"],
            "voucher": ["给您账户补偿一张{voucher}的优惠券。", "给您发一张优惠券作为补偿。"],
            "escalated": ["这个问题我升级给专员处理，48小时内回电。"]})),
        ("A", r.line("refund_amount", "{refund_amount}预计3到5个工作日到账。")),
        ("A", r.line("voucher", "另外送您一张{voucher}的优惠券。")),
        ("C", r.line("phone", "有事打我电话{phone}。")),
        ("A", r.line("ticket_id", "您的工单号是{ticket_id}。")),
        ("C", "" if email else r.by_value("satisfied", {True: ["好的，可以，谢谢！", "行，这样处理我接受。"],
                                                        False: ["这样处理我不能接受。", "太让人失望了。"]})),
    ]


def _dialogue(turns, labels: dict) -> str:
    return lines([f"{labels[s]}{t}" for s, t in turns if t])


def en_chat(r):
    return _dialogue(_turns_en(r), r.pick([{"C": "Customer: ", "A": "Agent: "}, {"C": "User: ", "A": "Support: "}]))


def zh_chat(r):
    return _dialogue(_turns_zh(r), r.pick([{"C": "客户：", "A": "客服："}, {"C": "买家：", "A": "客服："}]))


def _call(r, turns, labels):
    """A call transcript with timestamps; the clock runs 20-70 s per turn."""
    minute, sec, out = r.rng.randint(8, 17), r.rng.randint(0, 59), []
    for s, t in turns:
        if t:
            out.append(f"[{minute:02d}:{sec % 60:02d}] {labels[s]}: {t}")
            sec += r.rng.randint(20, 70)
            minute += sec // 60
            sec %= 60
    return lines(out)


def en_call(r):
    return "Call transcript\n" + _call(r, _turns_en(r), {"C": "Caller", "A": "Rep"})


def zh_call(r):
    return "通话记录\n" + _call(r, _turns_zh(r), {"C": "来电人", "A": "坐席"})


def _email(turns, header_c: str, header_a: str, sep: str) -> str:
    """The customer's e-mail (and sign-off) followed by the agent's reply."""
    part = {who: sep.join(t for s, t in turns if s == who and t) for who in "CSA"}
    return "\n".join([header_c, *(p for p in (part["C"], part["S"]) if p), "", header_a, part["A"]])


def en_email(r):
    turns = _turns_en(r, email=True)
    subject = r.pick(["Problem with my order", "Complaint", "Order issue - please help"])
    return _email(turns, f"Subject: {subject}\n\nHello,", "--- Reply from Customer Care ---", " ")


def zh_email(r):
    turns = _turns_zh(r, email=True)
    return _email(turns, f"主题：{r.pick(['订单问题', '投诉', '售后申请'])}\n\n你好：", "—— 客服回复 ——", "")


def _summary(r, lang):
    """Third-person facts for tickets and agent notes: (label, sentence) per fact."""
    issue = {"en": {"late_delivery": "late delivery", "damaged_item": "item arrived damaged", "wrong_item": "wrong item sent",
                    "billing_error": "overcharged"},
             "zh": {"late_delivery": "延迟发货", "damaged_item": "商品损坏", "wrong_item": "发错货", "billing_error": "多扣款"}}[lang]
    res = {"en": {"refund": "refund issued", "replacement": "replacement sent", "voucher": "voucher offered",
                  "escalated": "escalated to specialist team"},
           "zh": {"refund": "已退款", "replacement": "已补发", "voucher": "已发优惠券", "escalated": "已升级处理"}}[lang]
    if lang == "zh":
        return [
            ("客户", r.line("customer_name", "{customer_name}")), ("客服", r.line("agent_name", "{agent_name}")),
            ("订单号", r.line("order_id", "{order_id}")), ("商品", r.line("product", "{product}")),
            ("问题", r.by_value("issue_type", {k: [t] for k, t in issue.items()})),
            ("订单金额", r.line("order_amount", "{order_amount}", near=("已全额付款",))),
            ("原定送达", r.line("old_delivery_date", "{old_delivery_date}")),
            ("新送达日期", r.line("new_delivery_date", "{new_delivery_date}", near=("待定",))),
            ("处理", r.by_value("resolution", {k: [t] for k, t in res.items()})),
            ("退款", r.line("refund_amount", "{refund_amount}", near=("金额待财务确认",))),
            ("优惠券", r.line("voucher", "{voucher}")), ("电话", r.line("phone", "{phone}", near=("见账户信息",))),
            ("邮箱", r.line("email", "{email}")), ("工单", r.line("ticket_id", "{ticket_id}", near=("已登记，编号待生成",))),
            ("客户反馈", r.by_value("satisfied", {True: ["接受方案"], False: ["不满意，可能再次投诉"]})),
        ]
    return [
        ("Customer", r.line("customer_name", "{customer_name}")), ("Agent", r.line("agent_name", "{agent_name}")),
        ("Order", r.line("order_id", "{order_id}")), ("Product", r.line("product", "{product}")),
        ("Issue", r.by_value("issue_type", {k: [t] for k, t in issue.items()})),
        ("Order total", r.line("order_amount", "{order_amount}", near=("paid in full",))),
        ("Promised delivery", r.line("old_delivery_date", "{old_delivery_date}")),
        ("New delivery date", r.line("new_delivery_date", "{new_delivery_date}", near=("TBD",))),
        ("Resolution", r.by_value("resolution", {k: [t] for k, t in res.items()})),
        ("Refund", r.line("refund_amount", "{refund_amount}", near=("amount pending billing review",))),
        ("Voucher", r.line("voucher", "{voucher}")), ("Phone", r.line("phone", "{phone}", near=("on file",))),
        ("E-mail", r.line("email", "{email}")), ("Case", r.line("ticket_id", "{ticket_id}", near=("opened, number to follow",))),
        ("Customer response", r.by_value("satisfied", {True: ["accepted"], False: ["unhappy, may escalate"]})),
    ]


def en_ticket(r):
    rows = [f"{k}: {t}" for k, t in _summary(r, "en") if t]
    return lines([r.pick(["SUPPORT TICKET", "Case summary", "Ticket details"]), *rows])


def zh_ticket(r):
    sep = r.pick(["：", ": "])
    return lines([r.pick(["【售后工单】", "工单摘要", "客服处理单"]), *[f"{k}{sep}{t}" for k, t in _summary(r, "zh") if t]])


def en_notes(r):
    facts = {k: t for k, t in _summary(r, "en") if t}
    order = facts.pop("Order", "")
    head = f"{facts.pop('Customer', 'The customer')} contacted us" + (f" about order {order}." if order else ".")
    return lines([f"{r.pick(['Agent notes:', 'Call notes -', 'Internal note:'])} {head}",
                  *bullets([f"{k}: {t}" for k, t in facts.items()], "- ")])


def zh_notes(r):
    facts = {k: t for k, t in _summary(r, "zh") if t}
    order = facts.pop("订单号", "")
    head = f"客户{facts.pop('客户', '')}来电反映" + (f"订单{order}的问题。" if order else "订单问题。")
    return lines([r.pick(["客服备注：", "跟进记录："]) + head,
                  *bullets([f"{k}：{t}" for k, t in facts.items()], r.pick(["- ", "· "]))])


TEMPLATES = {"en": {"chat": en_chat, "call": en_call, "email": en_email, "ticket": en_ticket, "notes": en_notes},
             "zh": {"chat": zh_chat, "call": zh_call, "email": zh_email, "ticket": zh_ticket, "notes": zh_notes}}
RESERVED = {"en": "email", "zh": "notes"}
