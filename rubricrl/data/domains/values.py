"""Surface forms of values (money, dates, times, quantities) in both languages, and shared
vocabularies (people, cities). Each formatter returns a Fact whose surface is what the text says."""

from __future__ import annotations

import random

from rubricrl.data.domains.base import Fact

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")
WEEKDAYS_EN = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
WEEKDAYS_ZH = ("周一", "周二", "周三", "周四", "周五", "周六", "周日")
_CUMULATIVE_DAYS = (0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)

EN_FIRST = ("Sarah", "James", "Emily", "Michael", "Olivia", "Daniel", "Hannah", "David", "Grace",
            "Ryan", "Chloe", "Marcus", "Priya", "Kevin", "Laura", "Thomas", "Natalie", "Carlos",
            "Megan", "Aaron", "Sophie", "Jason", "Rachel", "Ethan", "Fatima", "Liam", "Maria")
EN_LAST = ("Mitchell", "Thompson", "Nguyen", "Patel", "Garcia", "O'Brien", "Walker", "Fischer",
           "Robinson", "Kim", "Hughes", "Alvarez", "Bennett", "Foster", "Chen", "Murphy", "Sullivan",
           "Rossi", "Okafor", "Larsen", "Brooks", "Hayes", "Coleman", "Reyes", "Sharma")
ZH_SURNAMES = ("王", "李", "张", "刘", "陈", "杨", "赵", "黄", "周", "吴", "徐", "孙", "马", "朱",
               "胡", "郭", "何", "林", "罗", "高", "梁", "宋", "郑", "谢", "韩", "唐", "冯", "许")
ZH_GIVEN = ("伟", "芳", "敏", "静", "丽", "强", "磊", "洋", "艳", "勇", "军", "杰", "娟", "涛", "明",
            "超", "秀英", "志强", "晓东", "雨婷", "佳怡", "子轩", "浩然", "欣怡", "建国", "海燕",
            "文博", "思远", "梦琪", "俊杰", "晓琳", "一鸣")
EN_CITIES = ("Seattle", "Austin", "Chicago", "Denver", "Boston", "Portland", "San Diego", "Atlanta",
             "Toronto", "Manchester", "Dublin", "Melbourne", "Phoenix", "Nashville", "Vancouver")
ZH_CITIES = ("北京", "上海", "广州", "深圳", "杭州", "成都", "南京", "武汉", "西安", "苏州", "重庆",
             "长沙", "厦门", "青岛", "天津")


def person(rng: random.Random, lang: str) -> str:
    if lang == "zh":
        return rng.choice(ZH_SURNAMES) + rng.choice(ZH_GIVEN)
    return f"{rng.choice(EN_FIRST)} {rng.choice(EN_LAST)}"


def people(rng: random.Random, lang: str, n: int) -> list[str]:
    """n different people (different surnames, so one is never a substring of another)."""
    out: list[str] = []
    while len(out) < n:
        p = person(rng, lang)
        family = p[0] if lang == "zh" else p.split()[-1]
        if all(family not in q for q in out):
            out.append(p)
    return out


def city(rng: random.Random, lang: str) -> str:
    return rng.choice(ZH_CITIES if lang == "zh" else EN_CITIES)


def num(x: float, decimals: int = 0, sep: bool = True) -> str:
    return f"{x:,.{decimals}f}" if sep else f"{x:.{decimals}f}"


def short(x: float) -> str:
    """1.5 -> '1.5', 12.0 -> '12' (no thousands separators)."""
    return f"{x:.6f}".rstrip("0").rstrip(".")


def money(rng: random.Random, amount: float, lang: str, style: int | None = None) -> Fact:
    """An amount as a text would write it, in yuan (zh) or dollars (en). `style` picks the
    writing (to write two amounts alike); by default it is random."""
    cur = "CNY" if lang == "zh" else "USD"
    cents = amount != int(amount)
    if cur == "CNY":
        d = 2 if cents else 0
        styles = [f"¥{num(amount, d)}", f"{num(amount, d, sep=False)}元", f"{num(amount, d)}元",
                  f"￥{num(amount, d, sep=False)}", f"人民币{num(amount, d, sep=False)}元"]
        if amount >= 10000 and amount % 100 == 0:
            styles += [f"{short(amount / 10000)}万元"] * 3
    else:
        styles = [f"${num(amount, 2)}", f"${num(amount, 2 if cents else 0)}", f"US${num(amount, 2 if cents else 0)}",
                  f"{num(amount, 2)} USD"]
    return Fact(amount, styles[style % len(styles)] if style is not None else rng.choice(styles), cur)


def big_money(rng: random.Random, amount: float, lang: str) -> Fact:
    """Large amounts (earnings, investments): '$4.2 billion', '$850 million', '42亿元', '8500万元'.

    grounding.py multiplies the written number by its multiplier in floating point (82.9 * 1e8 is
    8290000000.000001, which no longer equals 8290000000), so such an amount is written in whole
    millions or 万 instead ('$8,390 million', '829,000万元'), as financial statements also do."""
    if lang == "zh":
        if amount >= 1e8 and float(short(amount / 1e8)) * 1e8 == amount:
            return Fact(amount, f"{short(amount / 1e8)}亿元", "CNY")
        return Fact(amount, f"{num(amount / 1e4, 0, sep=rng.random() < 0.5)}万元", "CNY")
    if amount >= 1e9 and float(short(amount / 1e9)) * 1e9 == amount:
        return Fact(amount, f"${short(amount / 1e9)} billion", "USD")
    mantissa = num(amount / 1e6) if amount >= 1e9 else short(amount / 1e6)
    return Fact(amount, rng.choice([f"${mantissa} million", f"${mantissa}M"]), "USD")


def date(rng: random.Random, y: int, m: int, d: int, lang: str, weekday: bool = False) -> Fact:
    wd = _weekday(y, m, d)
    if lang == "zh":
        styles = [f"{y}年{m}月{d}日"] * 3 + [f"{y}/{m}/{d}", f"{y}.{m:02d}.{d:02d}"]
        s = rng.choice(styles)
        return Fact((y, m, d), f"{s}（{WEEKDAYS_ZH[wd]}）" if weekday else s)
    styles = [f"{MONTHS[m - 1]} {d}, {y}", f"{d} {MONTHS[m - 1]} {y}", f"{MONTHS[m - 1][:3]} {d}, {y}"]
    s = rng.choice(styles)
    return Fact((y, m, d), f"{WEEKDAYS_EN[wd]}, {s}" if weekday else s)


def random_date(rng: random.Random, year: int) -> tuple[int, int, int]:
    m = rng.randint(1, 12)
    return year, m, rng.randint(1, 28)


def shift_date(ymd: tuple[int, int, int], days: int) -> tuple[int, int, int]:
    """A date moved by up to a few weeks (for rescheduled and previous dates)."""
    y, m, d = ymd
    d += days
    while d > 28:
        d -= 28
        m += 1
    while d < 1:
        d += 28
        m -= 1
    if m > 12:
        y, m = y + 1, m - 12
    if m < 1:
        y, m = y - 1, m + 12
    return y, m, d


def _weekday(y: int, m: int, d: int) -> int:
    """Monday = 0 (Gregorian), without datetime so the module stays import-light."""
    days = (y - 1) * 365 + (y - 1) // 4 - (y - 1) // 100 + (y - 1) // 400 + _CUMULATIVE_DAYS[m - 1] + d
    if m > 2 and (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)):
        days += 1
    return (days - 1) % 7


def time(rng: random.Random, h: int, mi: int, lang: str) -> Fact:
    if lang == "zh":
        part = "凌晨" if h < 6 else "上午" if h < 12 else "下午" if h < 18 else "晚上"
        h12 = h if h <= 12 else h - 12
        styles = [f"{h}:{mi:02d}", f"{part}{h12}点" + (f"{mi}分" if mi else ""),
                  f"{part}{h12}:{mi:02d}"]
        if mi == 30:
            styles.append(f"{part}{h12}点半")
        return Fact((h, mi), rng.choice(styles))
    h12 = h % 12 or 12
    ampm = "am" if h < 12 else "pm"
    styles = [f"{h12}:{mi:02d} {ampm}", f"{h:02d}:{mi:02d}", f"{h12}:{mi:02d}{ampm.upper()}"]
    if mi == 0:
        styles.append(f"{h12} {ampm}")
    return Fact((h, mi), rng.choice(styles))


UNIT_WORDS = {
    "h": (("hours", "hrs", "hours"), ("小时", "个小时")),
    "min": (("minutes", "min"), ("分钟",)),
    "kg": (("kg", "kilograms", "kg"), ("千克", "公斤", "kg")),
    "g": (("g", "grams"), ("克", "g")),
    # Not "m²"/"㎡": grounding.py raises KeyError on "<number> m" (its multiplier table lacks "m").
    "m2": (("square metres", "sq m", "square meters"), ("平方米", "平米")),
    "mg": (("mg",), ("mg", "毫克")),
}


def qty(rng: random.Random, value: float, unit: str, lang: str) -> Fact:
    word = rng.choice(UNIT_WORDS[unit][1 if lang == "zh" else 0])
    n = num(value, 0) if value == int(value) and value >= 10000 else short(value)
    tight = lang == "zh" or (word in ("g", "kg", "mg") and rng.random() < 0.5)
    sep = "" if tight else " "
    return Fact(value, f"{n}{sep}{word}", unit)


def percent(rng: random.Random, value: float, lang: str) -> Fact:
    s = short(value)
    styles = [f"{s}%"] * 3 + ([f"百分之{s}"] if lang == "zh" else [f"{s} percent"])
    return Fact(value, rng.choice(styles), "%")


def rating(rng: random.Random, value: float, scale: int, lang: str) -> Fact:
    s = short(value)
    if lang == "zh":
        styles = [f"{s}/{scale}", f"{s}分（满分{scale}分）", f"{s}星" if scale == 5 else f"{s}分"]
    else:
        styles = [f"{s}/{scale}", f"{s} out of {scale}", f"{s} stars" if scale == 5 else f"{s}/{scale}"]
    return Fact(value, rng.choice(styles), str(scale))


def items(rng: random.Random, chosen: list[str], lang: str) -> Fact:
    """A list as running text: 'a, b and c' / 'a、b和c'."""
    if len(chosen) == 1:
        s = chosen[0]
    elif lang == "zh":
        s = "、".join(chosen[:-1]) + rng.choice(["和", "以及", "、"]) + chosen[-1]
    else:
        s = ", ".join(chosen[:-1]) + rng.choice([" and ", ", and ", ", "]) + chosen[-1]
    return Fact(list(chosen), s)


_CN_NUMERALS = "零一两三四五六七八九十"


def count(n: int, numeral: bool = False) -> Fact:
    """A count, or for small ones in Chinese texts the numeral (三)."""
    return Fact(n, _CN_NUMERALS[n] if numeral and n <= 10 else num(n))


def year(n: int) -> Fact:
    return Fact(n, str(n))


def text(value: str) -> Fact:
    return Fact(value, value)


def flag(value) -> Fact:
    """An enum or boolean: the template words it (by_value), so there is no surface."""
    return Fact(value)
