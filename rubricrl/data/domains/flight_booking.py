"""Flight bookings and change notices: rescheduled vs original date, departure vs arrival time
(24-hour format), base fare vs taxes vs change fee, flight time in hours or minutes."""

from __future__ import annotations

from rubricrl.data.domains import values as v
from rubricrl.data.domains.base import Conv, Field, bullets, lines, prose

NAME = "flight_booking"
TOPICS = {"en": ("booking confirmation", "flight itinerary", "travel booking message"), "zh": ("机票订单信息", "行程单", "航班通知")}
CABINS = ("economy", "premium_economy", "business", "first")

FIELDS = [
    Field("passenger", "text", ("passenger_name", "passenger", "traveler"), ("Passenger's name", "乘机人"), p_absent=0.1, p_schema=0.7),
    Field("booking_ref", "text", ("booking_reference", "pnr", "confirmation_code"), ("Booking reference", "订座记录编号"),
          p_absent=0.2, p_schema=0.5),
    Field("airline", "text", ("airline", "carrier"), ("Airline", "航空公司"), p_absent=0.15, p_schema=0.45),
    Field("flight_number", "text", ("flight_number", "flight_no", "flight"), ("Flight number", "航班号"), p_schema=0.7),
    Field("origin", "text", ("origin", "departure_city", "from_city"), ("Departure city", "出发城市"), p_schema=0.6),
    Field("destination", "text", ("destination", "arrival_city", "to_city"), ("Arrival city", "到达城市"), p_schema=0.6),
    Field("date", "date", ("departure_date", "travel_date", "flight_date"), ("Date of departure (current)", "起飞日期（以最新为准）"),
          p_schema=0.7),
    Field("old_date", "date", ("original_date", "previous_departure_date"), ("Date before the change", "改签前日期"),
          p_absent=0.5, p_schema=0.15),
    Field("dep_time", "time", ("departure_time", "departs_at", "takeoff_time"), ("Departure time", "起飞时间"), p_absent=0.1, p_schema=0.6),
    Field("arr_time", "time", ("arrival_time", "arrives_at", "landing_time"), ("Arrival time", "到达时间"), p_absent=0.3, p_schema=0.4),
    Field("seat", "text", ("seat", "seat_number", "seat_assignment"), ("Seat", "座位号"), p_absent=0.4, p_schema=0.4),
    Field("cabin", "enum", ("cabin", "cabin_class", "travel_class"), ("Cabin class", "舱位"), p_absent=0.1, p_schema=0.5, enum=CABINS),
    Field("fare", "money", ("base_fare", "fare", "ticket_price"), ("Fare before taxes", "票面价"), p_absent=0.25, p_schema=0.5,
          conv=(Conv(("fare_cents",), 100, ("cents", "美分"), True, "USD"),)),
    Field("taxes", "money", ("taxes", "taxes_and_fees", "tax_amount"), ("Taxes and fees", "税费"), p_absent=0.4, p_schema=0.3),
    Field("change_fee", "money", ("change_fee", "rebooking_fee"), ("Fee for the change", "改签费"), p_absent=0.4, p_schema=0.2,
          requires="old_date"),
    Field("duration", "qty", ("flight_duration", "duration", "travel_time"), ("Flight time", "飞行时长"), p_absent=0.45, p_schema=0.35,
          conv=(Conv(("duration_minutes", "flight_time_min"), 60, ("minutes", "分钟"), True, "h"),)),
    Field("baggage", "qty", ("baggage_allowance", "checked_baggage", "luggage_allowance"), ("Checked baggage allowance", "托运行李额"),
          p_absent=0.45, p_schema=0.3),
    Field("refundable", "bool", ("refundable", "is_refundable"), ("Whether the ticket can be refunded", "是否可退票"),
          p_absent=0.5, p_schema=0.3),
]

DISTRACTORS = {"date": [("old_date", "old_vs_new_value")], "dep_time": [("arr_time", "neighbouring_value")],
               "arr_time": [("dep_time", "neighbouring_value")], "fare": [("taxes", "neighbouring_value"),
                                                                          ("change_fee", "neighbouring_value")]}

NEAR = {
    "en": {"seat": ["Seats can be selected during online check-in."], "baggage": ["Checked baggage rules depend on your fare."],
           "arr_time": ["Arrival is in the early evening, local time."], "refundable": ["See the fare rules for refund conditions."],
           "duration": ["It's a long flight, so plan for jet lag."]},
    "zh": {"seat": ["座位可在网上值机时选择。"], "baggage": ["行李额以票面规定为准。"], "arr_time": ["傍晚抵达。"],
           "refundable": ["退改规则详见票面说明。"], "duration": ["航程较长，请注意休息。"]},
}

ROUTES = {"en": [("United Airlines", "UA", "San Francisco", "Tokyo", 11), ("Delta", "DL", "Atlanta", "Paris", 8.5),
                 ("British Airways", "BA", "London", "New York", 8), ("Air Canada", "AC", "Toronto", "Vancouver", 5),
                 ("Qantas", "QF", "Sydney", "Singapore", 8), ("American Airlines", "AA", "Chicago", "Miami", 3.5)],
          "zh": [("中国国航", "CA", "北京", "成都", 3), ("东方航空", "MU", "上海", "西安", 2.5), ("南方航空", "CZ", "广州", "乌鲁木齐", 5.5),
                 ("海南航空", "HU", "深圳", "哈尔滨", 4.5), ("山东航空", "SC", "青岛", "杭州", 2), ("四川航空", "3U", "重庆", "北京", 2.5)]}
_CABIN_EN = {"economy": "Economy", "premium_economy": "Premium Economy", "business": "Business", "first": "First"}
_CABIN_ZH = {"economy": "经济舱", "premium_economy": "超级经济舱", "business": "公务舱", "first": "头等舱"}


def sample(rng, lang):
    airline, code, origin, dest, hours = rng.choice(ROUTES[lang])
    if rng.random() < 0.5:
        origin, dest = dest, origin
    dep_h, dep_m = rng.randint(6, 21), rng.choice([0, 5, 15, 20, 30, 40, 45, 55])
    arr_total = (dep_h * 60 + dep_m + int(hours * 60) + rng.choice([0, 60, 120])) % (24 * 60)  # time zones shift the clock
    new = v.random_date(rng, 2026)
    cabin = rng.choice(["economy", "economy", "premium_economy", "business", "first"])
    fare = float(rng.randint(180, 1900)) + rng.choice([0.0, 0.4, 0.8]) if lang == "en" else float(rng.randint(6, 60) * 100)
    letters = "ABCDEFGHJKLMNPQRSTUVWXYZ"
    facts = {
        "passenger": v.text(v.person(rng, lang)), "airline": v.text(airline),
        "booking_ref": v.text("".join(rng.choice(letters + "23456789") for _ in range(6))),
        "flight_number": v.text(f"{code}{rng.choice([' ', ''])}{rng.randint(100, 2999)}" if lang == "en"
                                else f"{code}{rng.randint(1000, 8999)}"),
        "origin": v.text(origin), "destination": v.text(dest),
        "date": v.date(rng, *new, lang, weekday=rng.random() < 0.3),
        "old_date": v.date(rng, *v.shift_date(new, -rng.randint(1, 9)), lang),
        "dep_time": v.time(rng, dep_h, dep_m, lang), "arr_time": v.time(rng, arr_total // 60, arr_total % 60, lang),
        "seat": v.text(f"{rng.randint(3, 58)}{rng.choice('ACDFHK')}"), "cabin": v.flag(cabin),
        "fare": v.money(rng, round(fare, 2), lang), "taxes": v.money(rng, round(fare * 0.12, 2) if lang == "en" else 50.0, lang),
        "change_fee": v.money(rng, 75.0 if lang == "en" else rng.choice([200.0, 300.0]), lang),
        "duration": v.qty(rng, hours, "h", lang),
        "baggage": v.qty(rng, rng.choice([20, 23, 30, 32]), "kg", lang), "refundable": v.flag(rng.random() < 0.4),
    }
    return facts


def _change_en(r):
    return r.line("old_date", "Your flight originally scheduled for {old_date} has been moved to {date}.",
                  "Schedule change: {old_date} is now {date}.")


def _change_zh(r):
    return r.line("old_date", "您原定{old_date}的航班已改至{date}。", "航班由{old_date}调整为{date}。")


def en_email(r):
    return lines([
        r.say("Subject: Your trip to {destination} is confirmed", "Subject: Booking confirmation {booking_ref}"),
        r.say("Dear {passenger},", "Hello,"), _change_en(r),
        prose([r.say("Thank you for booking with {airline}.", "Your booking is confirmed."),
               r.line("change_fee", "A change fee of {change_fee} has been charged.")], "en"), "",
        r.line("booking_ref", "Confirmation code: {booking_ref}"),
        r.say("Flight: {flight_number} ({airline})", "Flight: {flight_number}"), r.line("airline", "Operated by {airline}"),
        r.line("origin", "Route: {origin} to {destination}"), r.line("destination", "Destination: {destination}"),
        r.line("date", "Date: {date}"), r.line("dep_time", "Departs: {dep_time}"), r.line("arr_time", "Arrives: {arr_time}"),
        r.line("duration", "Flight time: {duration}"), r.by_value("cabin", {k: [f"Cabin: {t}"] for k, t in _CABIN_EN.items()}),
        r.line("seat", "Seat: {seat}"), r.line("baggage", "Checked bag: {baggage}"),
        r.line("fare", "Base fare: {fare}"), r.line("taxes", "Taxes and fees: {taxes}"),
        r.by_value("refundable", {True: ["This fare is refundable."], False: ["This fare is non-refundable."]}),
        r.line("passenger", "Passenger: {passenger}"),
    ])


def en_prose(r):
    return prose([
        r.say("Hi {passenger}, you're all set for {date}.", "Good news: your seat on {flight_number} is booked."),
        _change_en(r), r.line("flight_number", "You'll fly {airline} {flight_number} from {origin} to {destination}.",
                              "You're on flight {flight_number} from {origin} to {destination}."),
        r.line("origin", "You depart from {origin} and land in {destination}."), r.line("airline", "The flight is operated by {airline}."),
        r.line("date", "The date of travel is {date}."),
        r.line("dep_time", "Take-off is at {dep_time} and you land at {arr_time} local time.", "Take-off is at {dep_time}."),
        r.line("arr_time", "Scheduled arrival: {arr_time}."), r.line("duration", "The flight takes about {duration}."),
        r.by_value("cabin", {k: [f"You're flying {t}."] for k, t in _CABIN_EN.items()}), r.line("seat", "Your seat is {seat}."),
        r.line("baggage", "One checked bag up to {baggage} is included."),
        r.line("fare", "You paid {fare} plus {taxes} in taxes.", "The fare was {fare}."), r.line("taxes", "Taxes came to {taxes}."),
        r.line("change_fee", "We charged a {change_fee} change fee."),
        r.by_value("refundable", {True: ["You can cancel for a full refund."], False: ["Note that the ticket is non-refundable."]}),
        r.line("booking_ref", "Your booking reference is {booking_ref}."), "Safe travels!",
    ], "en")


def en_table(r):
    head = "Flight | Date | From | To | Departs | Arrives"
    cells = [r.say("{flight_number}"), r.line("date", "{date}"), r.line("origin", "{origin}"), r.line("destination", "{destination}"),
             r.line("dep_time", "{dep_time}") or "-",
             r.line("arr_time", "{arr_time}", near=("evening (local time)",)) or "-"]
    return lines([r.say("ITINERARY - {passenger}", "ITINERARY"), r.line("booking_ref", "Booking ref: {booking_ref}"), head,
                  " | ".join(cells), _change_en(r),
                  *bullets([r.line("airline", "Airline: {airline}"),
                            r.by_value("cabin", {k: [f"Class: {t}"] for k, t in _CABIN_EN.items()}),
                            r.line("seat", "Seat {seat}"), r.line("duration", "Duration {duration}"),
                            r.line("baggage", "Baggage: {baggage}"),
                            r.line("fare", "Fare {fare}"), r.line("taxes", "Taxes {taxes}"),
                            r.line("change_fee", "Change fee {change_fee}"),
                            r.by_value("refundable", {True: ["Refundable"], False: ["Non-refundable"]})], "- "),
                  r.line("passenger", "Passenger: {passenger}")])


def en_chat(r):
    return lines([
        r.say("Traveler: Hi, can you check my booking {booking_ref}?", "Traveler: Hi, I need details on my flight."),
        r.say("Agent: Sure. You're on {flight_number} from {origin} to {destination}.", "Agent: Sure. You're on {flight_number}."),
        r.line("old_date",
               "Agent: It was moved from {old_date} to {date}, sorry about that.") or r.line("date", "Agent: It leaves on {date}."),
        r.line("date", "Agent: The date is {date}."), r.line("dep_time", "Agent: Departure is {dep_time}."),
        r.line("arr_time", "Traveler: And when do I land?\nAgent: {arr_time}.", near=("Agent: You arrive in the early evening.",)),
        r.line("seat", "Traveler: Which seat do I have?\nAgent: {seat}.", near=("Agent: You can pick a seat at check-in.",)),
        r.line("change_fee", "Traveler: Was there a fee for the change?\nAgent: Yes, {change_fee}."),
        r.line("fare", "Traveler: What did I pay?\nAgent: {fare} base fare, plus {taxes} in taxes.",
               "Traveler: What did I pay?\nAgent: {fare}."),
        r.line("taxes", "Agent: Taxes were {taxes}."), r.line("baggage", "Agent: Your allowance is {baggage} checked."),
        r.line("duration", "Agent: Flight time is {duration}."),
        r.by_value("cabin", {k: [f"Agent: You're in {t}."] for k, t in _CABIN_EN.items()}),
        "Traveler: Can I get a refund if I cancel?\nAgent: " + r.by_value("refundable",
                                                                          {True: ["Yes, it's refundable."], False: ["No, it isn't."]})
        if r.has("refundable") else "",
        r.line("airline", "Agent: Anything else I can do for you on {airline}?"),
        r.line("passenger", "Traveler: No, thanks. - {passenger}"),
    ])


def en_notice(r):
    return lines([
        r.say("FLIGHT CHANGE NOTICE: {flight_number}", "Important: update to flight {flight_number}"),
        r.say("Dear {passenger},", "Dear customer,"),
        prose([_change_en(r) or r.line("date", "Your flight is scheduled for {date}."),
               r.line("date", "New departure date: {date}."),
               r.line("dep_time", "It now departs {origin} at {dep_time}.", "Departure: {dep_time}."),
               r.line("arr_time", "Arrival in {destination} is planned for {arr_time}."),
               r.line("origin", "Route: {origin} - {destination}."),
               r.line("change_fee", "A {change_fee} change fee applies."), r.line("seat", "Your seat ({seat}) has been kept."),
               r.line("duration", "Flight time: {duration}."), r.line("fare", "Original fare: {fare}."), r.line("taxes", "Taxes: {taxes}."),
               r.by_value("cabin", {k: [f"Cabin: {t}."] for k, t in _CABIN_EN.items()}), r.line("baggage", "Baggage: {baggage}."),
               r.by_value("refundable", {True: ["You may cancel for a refund."], False: ["The ticket stays non-refundable."]}),
               r.line("booking_ref", "Reference: {booking_ref}."),
               r.line("airline", "We apologise for the inconvenience. - {airline}")], "en"),
    ])


def zh_sms(r):
    return prose([
        r.say("【{airline}】尊敬的{passenger}旅客，", "【航班提醒】尊敬的旅客，"), _change_zh(r),
        r.say("您预订的{date}{flight_number}航班（{origin}—{destination}）已出票，", "您的{flight_number}航班已出票，"),
        r.line("origin", "{origin}飞往{destination}，"), r.line("date", "日期{date}，"),
        r.line("dep_time", "{dep_time}起飞，预计{arr_time}到达。", "{dep_time}起飞。"), r.line("arr_time", "预计{arr_time}抵达。"),
        r.by_value("cabin", {k: [f"舱位：{t}。"] for k, t in _CABIN_ZH.items()}), r.line("seat", "座位{seat}。"),
        r.line("fare", "票价{fare}，税费{taxes}。", "票价{fare}。"), r.line("taxes", "税费{taxes}。"), r.line("change_fee", "已收取改签费{change_fee}。"),
        r.line("baggage", "免费托运行李{baggage}。"), r.line("duration", "飞行约{duration}。"),
        r.by_value("refundable", {True: ["本票可退。"], False: ["本票不得退票。"]}), r.line("booking_ref", "订座编号{booking_ref}。"),
        r.line("passenger", "乘机人：{passenger}。"), r.line("airline", "祝您旅途愉快！{airline}"),
    ], "zh")


def zh_kv(r):
    sep = r.pick(["：", ": "])
    rows = [("乘机人", r.line("passenger", "{passenger}")), ("订座编号", r.line("booking_ref", "{booking_ref}")),
            ("航空公司", r.line("airline", "{airline}")), ("航班号", r.say("{flight_number}")), ("出发", r.line("origin", "{origin}")),
            ("到达", r.line("destination", "{destination}")), ("原航班日期", r.line("old_date", "{old_date}")),
            ("日期", r.line("date", "{date}")), ("起飞", r.line("dep_time", "{dep_time}")), ("到达时间", r.line("arr_time", "{arr_time}")),
            ("飞行时长", r.line("duration", "{duration}", near=("以实际为准",))),
            ("舱位", r.by_value("cabin", {k: [t] for k, t in _CABIN_ZH.items()})),
            ("座位", r.line("seat", "{seat}", near=("值机时选座",))), ("票价", r.line("fare", "{fare}")), ("税费", r.line("taxes", "{taxes}")),
            ("改签费", r.line("change_fee", "{change_fee}")), ("行李", r.line("baggage", "{baggage}", near=("以票面规定为准",))),
            ("退票", r.by_value("refundable", {True: ["可退"], False: ["不可退"]}))]
    return lines([r.pick(["电子客票行程单", "【出票成功】"]), *[f"{k}{sep}{t}" for k, t in rows if t]])


def zh_notice(r):
    return lines([
        r.say("航班变动通知｜{flight_number}", "关于{flight_number}航班调整的通知"),
        r.say("尊敬的{passenger}：", "尊敬的旅客："),
        prose([_change_zh(r) or r.line("date", "您的航班日期为{date}。"),
               r.line("date", "新的起飞日期：{date}。"), r.line("dep_time", "起飞时间{dep_time}，", "起飞时间调整为{dep_time}。"),
               r.line("arr_time", "预计{arr_time}到达{destination}。"), r.line("origin", "航线：{origin}—{destination}。"),
               r.line("change_fee", "需补改签费{change_fee}。"), r.line("seat", "原座位{seat}保留。"), r.line("fare", "原票价{fare}。"),
               r.line("taxes", "税费{taxes}。"), r.by_value("cabin", {k: [f"舱位{t}。"] for k, t in _CABIN_ZH.items()}),
               r.line("duration", "飞行时长约{duration}。"), r.line("baggage", "行李额{baggage}。"),
               r.by_value("refundable", {True: ["如不接受可全额退票。"], False: ["该客票不可退。"]}),
               r.line("booking_ref", "订座编号：{booking_ref}。"), r.line("airline", "给您带来不便，敬请谅解。{airline}")], "zh"),
    ])


def zh_chat(r):
    return lines([
        r.say("旅客：你好，帮我查下订单{booking_ref}。", "旅客：你好，想查一下我的航班。"),
        r.say("客服：好的，您乘坐的是{flight_number}，{origin}飞{destination}。", "客服：好的，您的航班是{flight_number}。"),
        r.line("old_date", "客服：航班从{old_date}改到了{date}。") or r.line("date", "客服：{date}的航班。"), r.line("date", "客服：日期是{date}。"),
        r.line("dep_time", "旅客：几点起飞？\n客服：{dep_time}。"), r.line("arr_time", "旅客：几点到？\n客服：{arr_time}。", near=("客服：傍晚到达。",)),
        r.line("seat", "旅客：座位是哪个？\n客服：{seat}。", near=("客服：座位值机时可以选。",)),
        r.line("change_fee", "旅客：改签收费了吗？\n客服：收了{change_fee}。"), r.line("fare", "旅客：票价多少？\n客服：{fare}，另有税费{taxes}。",
                                                                             "旅客：票价多少？\n客服：{fare}。"),
        r.line("taxes", "客服：税费{taxes}。"), r.line("baggage", "客服：可以免费托运{baggage}。"), r.line("duration", "客服：飞行时间大约{duration}。"),
        r.by_value("cabin", {k: [f"客服：您订的是{t}。"] for k, t in _CABIN_ZH.items()}),
        "旅客：能退吗？\n客服：" + r.by_value("refundable", {True: ["可以退。"], False: ["这张票不能退。"]}) if r.has("refundable") else "",
        r.line("airline", "客服：感谢您选择{airline}。"), r.line("passenger", "旅客：好的，谢谢。（{passenger}）"),
    ])


TEMPLATES = {"en": {"email": en_email, "prose": en_prose, "table": en_table, "chat": en_chat, "notice": en_notice},
             "zh": {"sms": zh_sms, "kv": zh_kv, "notice": zh_notice, "chat": zh_chat}}
RESERVED = {"en": "chat", "zh": "notice"}
