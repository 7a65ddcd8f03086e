"""Quarterly earnings reports: revenue vs year-ago revenue vs next-quarter guidance, EPS vs the
analysts' estimate, margins now and a year ago, amounts in millions/billions or 亿元/万元."""

from __future__ import annotations

from rubricrl.data.domains import values as v
from rubricrl.data.domains.base import Conv, Field, bullets, lines, prose

NAME = "earnings_report"
TOPICS = {"en": ("earnings release", "quarterly results report", "earnings news"), "zh": ("业绩公告", "季度财报摘要", "财报新闻")}


def _big(prefix: str) -> tuple[Conv, ...]:
    return (Conv((f"{prefix}_millions", f"{prefix}_musd"), 1e-6, ("millions of US dollars", "百万美元"), False, "USD"),
            Conv((f"{prefix}_billions",), 1e-9, ("billions of US dollars", "十亿美元"), False, "USD"),
            Conv((f"{prefix}_yi", f"{prefix}_100m_cny"), 1e-8, ("hundreds of millions of yuan (亿元)", "亿元"), False, "CNY"),
            Conv((f"{prefix}_wan",), 1e-4, ("ten-thousands of yuan (万元)", "万元"), False, "CNY"))


FIELDS = [
    Field("company", "text", ("company", "company_name", "issuer"), ("Reporting company", "公司名称"), p_schema=0.75),
    Field("ticker", "text", ("ticker", "stock_code", "symbol"), ("Stock ticker or code", "股票代码"), p_absent=0.35, p_schema=0.35),
    Field("period", "text", ("period", "fiscal_period", "reporting_period"), ("Period reported, as written", "报告期（按原文）"),
          p_schema=0.45),
    Field("quarter", "enum", ("quarter", "fiscal_quarter"), ("Quarter reported", "季度"), p_schema=0.35, enum=("Q1", "Q2", "Q3", "Q4"),
          implied_by=("period",)),
    Field("revenue", "money", ("revenue", "total_revenue", "net_sales", "quarterly_revenue"), ("Revenue this quarter", "本季度营收"),
          p_schema=0.85, conv=_big("revenue")),
    Field("prior_revenue", "money", ("prior_year_revenue", "revenue_year_ago"), ("Revenue in the same quarter last year", "上年同期营收"),
          p_absent=0.4, p_schema=0.2, conv=_big("prior_revenue")),
    Field("growth", "percent", ("revenue_growth", "yoy_growth", "revenue_growth_pct"), ("Year-over-year revenue growth", "营收同比增幅"),
          p_absent=0.2, p_schema=0.55),
    Field("net_income", "money", ("net_income", "net_profit", "profit"), ("Net income", "净利润"), p_absent=0.25, p_schema=0.55,
          conv=_big("net_income")),
    Field("eps", "money", ("eps", "diluted_eps", "earnings_per_share"), ("Earnings per share", "每股收益"), p_absent=0.3, p_schema=0.5),
    Field("eps_estimate", "money", ("eps_estimate", "consensus_eps", "analyst_eps"), ("Analysts' EPS estimate", "分析师预期每股收益"),
          p_absent=0.45, p_schema=0.2),
    Field("beat", "bool", ("beat_estimates", "beat_expectations", "eps_beat"), ("Whether EPS beat the estimate", "是否超预期"),
          p_schema=0.3, requires="eps", implied_by=("eps", "eps_estimate")),
    Field("margin", "percent", ("gross_margin", "gross_margin_pct"), ("Gross margin this quarter", "本季度毛利率"),
          p_absent=0.35, p_schema=0.45),
    Field("prior_margin", "percent", ("prior_gross_margin", "gross_margin_year_ago"), ("Gross margin a year ago", "上年同期毛利率"),
          p_absent=0.45, p_schema=0.15, requires="margin"),
    Field("guidance", "money", ("next_quarter_guidance", "revenue_guidance", "outlook_revenue"),
          ("Midpoint revenue outlook for next quarter", "下季度营收指引"), p_absent=0.5, p_schema=0.3, conv=_big("guidance")),
    Field("dividend", "money", ("dividend_per_share", "quarterly_dividend", "dividend"), ("Dividend per share", "每股股息"),
          p_absent=0.55, p_schema=0.3),
    Field("employees", "int", ("employees", "headcount", "employee_count"), ("Number of employees", "员工人数"),
          p_absent=0.6, p_schema=0.2),
    Field("ceo", "text", ("ceo", "chief_executive", "ceo_name"), ("Chief executive", "首席执行官"), p_absent=0.3, p_schema=0.4),
    Field("cfo", "text", ("cfo", "chief_financial_officer", "cfo_name"), ("Chief financial officer", "首席财务官"),
          p_absent=0.45, p_schema=0.25),
    Field("report_date", "date", ("report_date", "release_date", "announced_on"), ("Date of the release", "发布日期"),
          p_absent=0.3, p_schema=0.4),
]

DISTRACTORS = {"revenue": [("prior_revenue", "old_vs_new_value"), ("guidance", "neighbouring_value")],
               "eps": [("eps_estimate", "neighbouring_value")], "margin": [("prior_margin", "old_vs_new_value")],
               "ceo": [("cfo", "two_people")], "cfo": [("ceo", "two_people")],
               "net_income": [("revenue", "neighbouring_value")]}

NEAR = {
    "en": {"guidance": ["The company did not give a revenue forecast for the next quarter."],
           "dividend": ["The board will review the dividend policy later this year."],
           "margin": ["Margins improved thanks to lower component costs."],
           "eps": ["Per-share figures will be published in the full filing."]},
    "zh": {"guidance": ["公司未披露下一季度营收指引。"], "dividend": ["董事会将于年内审议分红政策。"],
           "margin": ["受益于原材料成本下降，盈利能力有所提升。"], "eps": ["每股指标将在正式报告中披露。"]},
}

COMPANIES = {"en": [("Veridian Systems", "NASDAQ: VRDN"), ("Hollis Foods", "NYSE: HLF"), ("Auriga Networks", "NASDAQ: AURG"),
                    ("Crescent Pharma", "NYSE: CRPH"), ("Tidewater Retail", "NYSE: TDRT")],
             "zh": [("瑞辰科技", "688512"), ("恒润食品", "603917"), ("星辉网络", "300742"), ("华康医药", "600873"), ("万嘉零售", "002681")]}
# Compact forms only: "the third quarter of 2025" would leave it open whether "the" is part of it.
_PERIOD = {"en": ("Q{q} {y}", "fiscal Q{q} {y}", "Q{q} FY{y}"),
           "zh": ("{y}年第{cq}季度", "{y}年Q{q}")}


def sample(rng, lang):
    company, ticker = rng.choice(COMPANIES[lang])
    ceo, cfo = v.people(rng, lang, 2)
    q, y = rng.randint(1, 4), rng.choice([2025, 2026])
    revenue = rng.randint(120, 980) * 1e7  # 1.2 - 9.8 billion
    prior = round(revenue / rng.choice([1.04, 1.08, 1.12, 1.18, 1.25]), -7)
    margin = float(rng.randint(280, 620)) / 10
    eps = rng.randint(40, 380) / 100
    estimate = round(eps + rng.choice([-0.08, -0.05, 0.04, 0.06]), 2)
    period = rng.choice(_PERIOD[lang]).format(q=q, y=y, cq="一二三四"[q - 1])
    return {
        "company": v.text(company), "ticker": v.text(ticker), "period": v.text(period), "quarter": v.flag(f"Q{q}"),
        "revenue": v.big_money(rng, revenue, lang), "prior_revenue": v.big_money(rng, prior, lang),
        "growth": v.percent(rng, round((revenue / prior - 1) * 100, 1), lang),
        "net_income": v.big_money(rng, round(revenue * rng.choice([0.08, 0.11, 0.14, 0.17]), -6), lang),
        "eps": v.money(rng, eps, lang), "eps_estimate": v.money(rng, estimate, lang), "beat": v.flag(eps > estimate),
        "margin": v.percent(rng, margin, lang), "prior_margin": v.percent(rng, round(margin - rng.choice([1.2, 2.5, -1.8]), 1), lang),
        "guidance": v.big_money(rng, round(revenue * rng.choice([1.03, 1.05, 1.07]), -7), lang),
        "dividend": v.money(rng, rng.choice([0.12, 0.24, 0.35, 0.5]), lang),
        "employees": v.count(rng.randint(30, 250) * 100), "ceo": v.text(ceo), "cfo": v.text(cfo),
        # Results come out a few weeks after the quarter ends.
        "report_date": v.date(rng, y + (q == 4), 3 * q % 12 + rng.choice([1, 2]), rng.randint(1, 28), lang),
    }


def _body_en(r):
    return [
        r.say("{company} ({ticker}) reported revenue of {revenue} for {period}.", "{company} posted revenue of {revenue} for {period}.",
              "For {period}, {company} said revenue reached {revenue}."),
        r.line("growth", "That is up {growth} from {prior_revenue} a year earlier.", "Revenue grew {growth} year over year."),
        r.line("prior_revenue", "A year ago the company reported {prior_revenue}."),
        r.line("net_income", "Net income was {net_income}.", "Profit came in at {net_income}."),
        r.line("eps", "Diluted EPS was {eps}, compared with the {eps_estimate} analysts had expected.", "Earnings per share were {eps}."),
        r.line("eps_estimate", "Analysts had forecast {eps_estimate} per share."),
        r.line("margin", "Gross margin was {margin}, compared with {prior_margin} a year earlier.", "Gross margin was {margin}."),
        r.line("prior_margin", "(Gross margin a year ago: {prior_margin}.)"),
        r.line("guidance", "For the next quarter, the company expects revenue of about {guidance}."),
        r.line("dividend", "The board declared a quarterly dividend of {dividend} per share."),
        r.line("employees", "The company ended the quarter with {employees} employees."),
        r.line("ceo", '"Demand stayed strong across our markets," said CEO {ceo}.'),
        r.line("cfo", "CFO {cfo} said the company would keep investing in growth."),
        r.line("report_date", "The results were released on {report_date}."), r.line("ticker", "The shares trade as {ticker}."),
    ]


def _body_zh(r):
    return [
        r.say("{company}（{ticker}）公布{period}业绩，实现营业收入{revenue}。", "{company}发布{period}财报，营收{revenue}。",
              "{period}，{company}实现营收{revenue}。"),
        r.line("growth", "同比增长{growth}，上年同期为{prior_revenue}。", "同比增长{growth}。"),
        r.line("prior_revenue", "上年同期营收为{prior_revenue}。"), r.line("net_income", "净利润{net_income}。", "归母净利润为{net_income}。"),
        r.line("eps", "每股收益{eps}，市场预期为{eps_estimate}。", "每股收益{eps}。"), r.line("eps_estimate", "此前分析师预期每股收益{eps_estimate}。"),
        r.line("margin", "毛利率{margin}，上年同期为{prior_margin}。", "毛利率为{margin}。"), r.line("prior_margin", "（上年同期毛利率{prior_margin}。）"),
        r.line("guidance", "公司预计下一季度营收约{guidance}。"), r.line("dividend", "董事会拟每股派发股息{dividend}。"),
        r.line("employees", "截至季度末，公司员工{employees}人。"), r.line("ceo", "首席执行官{ceo}表示，各业务线需求保持旺盛。"),
        r.line("cfo", "首席财务官{cfo}表示将继续加大研发投入。"), r.line("report_date", "公告发布日期为{report_date}。"),
        r.line("ticker", "股票代码{ticker}。"),
    ]


def en_release(r):
    title = r.say("{company} reports results for {period}", "{company} revenue rises {growth} in {period}")
    return lines([title, prose([r.line("report_date", "{report_date} --", "(Business Wire, {report_date})"), *_body_en(r)], "en")])


def en_brief(r):
    return prose([r.pick(["Earnings brief:", "Market wrap:", ""]), *_body_en(r)], "en")


def en_bullets(r):
    return lines([
        r.say("Highlights from {company}'s results for {period}", "{company} results ({period}) at a glance"),
        *bullets([r.line("revenue", "Revenue: {revenue}"), r.line("growth", "Growth: +{growth} y/y"),
                  r.line("prior_revenue", "Prior-year revenue: {prior_revenue}"), r.line("net_income", "Net income: {net_income}"),
                  r.line("eps", "EPS: {eps} (est. {eps_estimate})", "EPS: {eps}", near=("EPS: in the full filing",)),
                  r.line("eps_estimate", "Consensus EPS: {eps_estimate}"), r.line("margin", "Gross margin: {margin} (prior {prior_margin})",
                                                                                 "Gross margin: {margin}"),
                  r.line("guidance", "Next-quarter outlook: ~{guidance}", near=("Outlook: none given",)),
                  r.line("dividend", "Dividend: {dividend}/share"), r.line("employees", "Employees: {employees}")], r.pick(["- ", "* "])),
        prose([r.line("ceo", "CEO: {ceo}."), r.line("cfo", "CFO: {cfo}."), r.line("ticker", "Ticker: {ticker}."),
               r.line("report_date", "Released {report_date}.")], "en"),
    ])


def en_kv(r):
    return lines([
        r.pick(["FINANCIAL SUMMARY", "Quarterly results (unaudited)"]), r.say("Company: {company}"), r.line("ticker", "Ticker: {ticker}"),
        r.line("period", "Period: {period}"), r.line("revenue", "Revenue: {revenue}"),
        r.line("prior_revenue", "Revenue, prior year: {prior_revenue}"),
        r.line("growth", "Change: {growth}"), r.line("net_income", "Net income: {net_income}"), r.line("eps", "Diluted EPS: {eps}"),
        r.line("eps_estimate", "Consensus EPS: {eps_estimate}"), r.line("margin", "Gross margin: {margin}"),
        r.line("prior_margin", "Gross margin, prior year: {prior_margin}"), r.line("guidance", "Q+1 revenue outlook: {guidance}"),
        r.line("dividend", "Dividend per share: {dividend}", near=("Dividend: under review",)),
        r.line("employees", "Headcount: {employees}"),
        r.line("ceo", "CEO: {ceo}"), r.line("cfo", "CFO: {cfo}"), r.line("report_date", "Release date: {report_date}"),
    ])


def en_call(r):
    cfo, ceo = "CFO", "CEO"  # speakers by role; their names are in the participants line
    return lines([
        r.say("{company} earnings call, {period} (excerpt)"),
        "Participants: " + (", ".join(p for p in (r.line("ceo", "{ceo} (CEO)"), r.line("cfo", "{cfo} (CFO)")) if p) or "management"),
        f"{ceo}: " + (r.line("revenue", "We delivered revenue of {revenue}, up {growth} year over year.", "Revenue came in at {revenue}.")
                      or "It was a solid quarter."),
        r.line("prior_revenue", f"{cfo}: For reference, the year-ago quarter was {{prior_revenue}}."),
        r.line("growth", f"{cfo}: That's growth of {{growth}}."),
        r.line("net_income", f"{cfo}: Net income was {{net_income}}."),
        r.line("eps", f"Analyst: And EPS?\n{cfo}: {{eps}} diluted, versus consensus of {{eps_estimate}}.",
               f"Analyst: And EPS?\n{cfo}: {{eps}}."),
        r.line("margin", f"{cfo}: Gross margin was {{margin}}, versus {{prior_margin}} a year ago.",
               f"{cfo}: Gross margin was {{margin}}."),
        r.line("guidance", f"Analyst: Any guidance?\n{cfo}: We expect about {{guidance}} next quarter.",
               near=(f"Analyst: Any guidance?\n{cfo}: We're not giving a number today.",)),
        r.line("dividend", f"{cfo}: We're also paying {{dividend}} per share."),
        r.line("employees", f"{ceo}: We now have {{employees}} people."),
        r.line("ticker", "({ticker})"), r.line("report_date", "Call held on {report_date}."),
    ])


def zh_notice(r):
    title = r.say("{company}：{period}营收{revenue}", "{company}发布{period}业绩公告")
    return lines([title, prose(_body_zh(r), "zh")])


def zh_brief(r):
    return r.pick(["【财报速递】", "快讯：", ""]) + prose(_body_zh(r), "zh")


def zh_bullets(r):
    return lines([
        r.say("{company}{period}业绩要点", "一图看懂{company}{period}财报"),
        *bullets([r.line("revenue", "营收：{revenue}"), r.line("growth", "同比：+{growth}"), r.line("prior_revenue", "上年同期：{prior_revenue}"),
                  r.line("net_income", "净利润：{net_income}"), r.line("eps", "每股收益：{eps}（预期{eps_estimate}）", "每股收益：{eps}"),
                  r.line("eps_estimate", "市场预期：{eps_estimate}"), r.line("margin", "毛利率：{margin}"),
                  r.line("prior_margin", "去年同期毛利率：{prior_margin}"), r.line("guidance", "下季度指引：约{guidance}", near=("下季度指引：未披露",)),
                  r.line("dividend", "每股股息：{dividend}"), r.line("employees", "员工：{employees}人")], r.pick(["· ", "- "])),
        prose([r.line("ceo", "CEO：{ceo}。"), r.line("cfo", "CFO：{cfo}。"), r.line("ticker", "代码：{ticker}。"),
               r.line("report_date", "发布：{report_date}。")], "zh"),
    ])


def zh_kv(r):
    sep = r.pick(["：", " | "])
    rows = [("公司", r.say("{company}")), ("股票代码", r.line("ticker", "{ticker}")), ("报告期", r.line("period", "{period}")),
            ("营业收入", r.line("revenue", "{revenue}")), ("上年同期营收", r.line("prior_revenue", "{prior_revenue}")),
            ("同比增长", r.line("growth", "{growth}")), ("净利润", r.line("net_income", "{net_income}")), ("每股收益", r.line("eps", "{eps}")),
            ("预期每股收益", r.line("eps_estimate", "{eps_estimate}")), ("毛利率", r.line("margin", "{margin}")),
            ("上年同期毛利率", r.line("prior_margin", "{prior_margin}")), ("下季度营收指引", r.line("guidance", "{guidance}")),
            ("每股股息", r.line("dividend", "{dividend}", near=("待审议",))), ("员工人数", r.line("employees", "{employees}")),
            ("首席执行官", r.line("ceo", "{ceo}")), ("首席财务官", r.line("cfo", "{cfo}")), ("发布日期", r.line("report_date", "{report_date}"))]
    return lines([r.pick(["主要财务数据", "【业绩摘要】"]), *[f"{k}{sep}{t}" for k, t in rows if t]])


def zh_call(r):
    cfo = "财务负责人"  # speaker by role; names are in the participants line
    return lines([
        r.say("{company}{period}业绩说明会（节选）"),
        "出席：" + ("、".join(p for p in (r.line("ceo", "首席执行官{ceo}"), r.line("cfo", "首席财务官{cfo}")) if p) or "公司管理层"),
        r.line("revenue", f"{cfo}：本季度实现营收{{revenue}}，同比增长{{growth}}。", f"{cfo}：本季度营收{{revenue}}。"),
        r.line("growth", f"{cfo}：同比增幅{{growth}}。"), r.line("prior_revenue", f"{cfo}：去年同期是{{prior_revenue}}。"),
        r.line("net_income", f"{cfo}：净利润{{net_income}}。"),
        r.line("eps", f"分析师：每股收益呢？\n{cfo}：{{eps}}，市场一致预期是{{eps_estimate}}。", f"分析师：每股收益呢？\n{cfo}：{{eps}}。"),
        r.line("margin", f"{cfo}：毛利率{{margin}}。"), r.line("prior_margin", f"{cfo}：去年同期毛利率为{{prior_margin}}。"),
        r.line("guidance", f"分析师：下季度有指引吗？\n{cfo}：预计营收{{guidance}}左右。", near=(f"分析师：下季度有指引吗？\n{cfo}：暂不提供。",)),
        r.line("dividend", f"{cfo}：每股派息{{dividend}}。"), r.line("employees", "（公司员工{employees}人）"),
        r.line("ticker", "（{ticker}）"), r.line("report_date", "会议日期：{report_date}。"),
    ])


TEMPLATES = {"en": {"release": en_release, "brief": en_brief, "bullets": en_bullets, "kv": en_kv, "call": en_call},
             "zh": {"notice": zh_notice, "brief": zh_brief, "bullets": zh_bullets, "kv": zh_kv, "call": zh_call}}
RESERVED = {"en": "call", "zh": "call"}
