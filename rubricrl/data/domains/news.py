"""News about investment projects (plants, data centers, campuses): amounts in millions/billions
or 亿/万, jobs created vs existing staff, opening vs announcement date, spokesperson vs official."""

from __future__ import annotations

from rubricrl.data.domains import values as v
from rubricrl.data.domains.base import Conv, Field, bullets, lines, prose

NAME = "news"
TOPICS = {"en": ("news article", "news report", "press report"), "zh": ("新闻报道", "新闻稿", "报道")}
CATEGORIES = ("manufacturing", "technology", "energy", "healthcare", "logistics")

FIELDS = [
    Field("headline", "text", ("headline", "title"), ("The article's headline", "新闻标题"), p_schema=0.35),
    Field("organization", "text", ("company", "organization", "investor"), ("Company behind the project", "投资方"),
          p_schema=0.8),
    Field("project", "text", ("project", "facility", "project_type"), ("What will be built", "项目内容"), p_schema=0.4),
    Field("city", "text", ("city", "location", "site"), ("Where it will be built", "项目所在地"), p_absent=0.1),
    Field("category", "enum", ("category", "sector", "industry"), ("Sector", "行业"), p_schema=0.45, enum=CATEGORIES),
    Field("investment", "money", ("investment", "investment_amount", "total_investment"), ("Total investment", "总投资额"),
          p_absent=0.15, p_schema=0.75,
          conv=(Conv(("investment_million_usd", "investment_musd"), 1e-6, ("millions of US dollars", "百万美元"), False, "USD"),
                Conv(("investment_yi_yuan", "investment_100m_cny"), 1e-8, ("hundreds of millions of yuan (亿元)", "亿元"),
                     False, "CNY"),
                Conv(("investment_wan_yuan",), 1e-4, ("ten-thousands of yuan (万元)", "万元"), False, "CNY"))),
    Field("phase_one", "money", ("phase_one_cost", "first_phase_investment"), ("Cost of an earlier phase", "一期投资"),
          p_absent=0.55, p_schema=0.15),
    Field("jobs", "int", ("jobs_created", "new_jobs", "job_count"), ("New jobs", "新增就业岗位"), p_absent=0.3, p_schema=0.55),
    Field("staff", "int", ("current_employees", "existing_staff"), ("People already employed", "现有员工"),
          p_absent=0.55, p_schema=0.15),
    Field("subsidy", "percent", ("subsidy_share", "public_funding_share", "subsidy_percent"),
          ("Share of the cost paid by the government", "政府补贴比例"), p_absent=0.5, p_schema=0.35),
    Field("open_date", "date", ("opening_date", "expected_opening", "completion_date"), ("When it opens", "预计投产日期"),
          p_absent=0.3, p_schema=0.55),
    Field("announce_date", "date", ("announcement_date", "announced_on", "published_date"), ("Announcement date", "发布日期"),
          p_absent=0.35, p_schema=0.3),
    Field("spokesperson", "text", ("spokesperson", "company_contact", "quoted_executive"),
          ("Company representative quoted", "公司发言人"), p_absent=0.2, p_schema=0.5),
    Field("official", "text", ("official", "government_official"), ("Public official quoted", "政府官员"),
          p_absent=0.4, p_schema=0.2),
]

DISTRACTORS = {"investment": [("phase_one", "neighbouring_value")], "jobs": [("staff", "neighbouring_value")],
               "open_date": [("announce_date", "neighbouring_value")], "announce_date": [("open_date", "neighbouring_value")],
               "spokesperson": [("official", "two_people")], "official": [("spokesperson", "two_people")]}

NEAR = {
    "en": {"investment": ["The company did not disclose how much it will spend."],
           "jobs": ["The project is expected to bring hundreds of jobs to the area, though no exact figure was given."],
           "open_date": ["No opening date has been set."], "subsidy": ["State support for the project is still being negotiated."]},
    "zh": {"investment": ["投资金额暂未披露。"], "jobs": ["项目预计将带动大量就业，但具体岗位数量尚未公布。"],
           "open_date": ["投产时间尚未确定。"], "subsidy": ["地方政府的支持政策仍在商谈中。"]},
}

ORGS = {"en": [("Redwood Energy", "energy", "battery plant"), ("Northstar Semiconductors", "technology", "chip factory"),
               ("Bluewater Logistics", "logistics", "distribution hub"), ("Helix Biotech", "healthcare", "research campus"),
               ("Summit Motors", "manufacturing", "EV assembly plant"), ("Clearpath Data", "technology", "data center")],
        "zh": [("宁远新能源", "energy", "储能电池工厂"), ("华芯半导体", "technology", "芯片制造基地"), ("顺达物流", "logistics", "智能物流园"),
               ("康瑞生物", "healthcare", "研发中心"), ("远航汽车", "manufacturing", "新能源整车工厂"), ("云启数据", "technology", "数据中心")]}
TITLES = {"en": ("chief operating officer", "vice president of operations", "spokesperson", "chief executive"),
          "zh": ("副总裁", "新闻发言人", "总经理", "董事长")}
OFFICIAL_TITLES = {"en": ("Mayor", "Governor", "Councilmember"), "zh": ("市长", "副市长", "区委书记")}


def sample(rng, lang):
    org, category, project = rng.choice(ORGS[lang])
    spokesperson, official = v.people(rng, lang, 2)
    announce = v.random_date(rng, 2026)
    if lang == "zh":
        amount, phase = rng.choice([12, 35, 48, 120, 260]) * 1e8, rng.choice([3, 5, 8]) * 1e8
        if rng.random() < 0.3:
            amount, phase = rng.choice([6000, 8500]) * 1e4, rng.choice([1500, 2000]) * 1e4
    else:
        amount = rng.choice([1.2, 2.5, 3.4, 4, 0.45, 0.75, 0.85]) * 1e9
        phase = rng.choice([150, 200, 300]) * 1e6
    return {
        "organization": v.text(org), "project": v.text(project), "category": v.flag(category),
        "city": v.text(v.city(rng, lang)),
        "investment": v.big_money(rng, amount, lang), "phase_one": v.big_money(rng, phase, lang),
        "jobs": v.count(rng.choice([350, 800, 1200, 1500, 2400, 3000])),
        "staff": v.count(rng.choice([4100, 5600, 6800, 9200])),
        "subsidy": v.percent(rng, rng.choice([12.5, 15, 20, 8.5, 30]), lang),
        "open_date": v.date(rng, *v.random_date(rng, rng.choice([2027, 2028])), lang),
        "announce_date": v.date(rng, *announce, lang),
        "spokesperson": v.text(spokesperson), "official": v.text(official),
        "title": v.text(rng.choice(TITLES[lang])), "official_title": v.text(rng.choice(OFFICIAL_TITLES[lang])),
    }


def _body_en(r):
    return [
        r.say("{organization} said on {announce_date} that it will invest {investment} in a new {project} in {city}.",
              "{organization} will build a {project} in {city}, the company announced.",
              "{organization} plans to spend {investment} on a {project} in {city}.",
              "{organization} is planning a new {project}, the company said."),
        r.line("investment", "The project will cost {investment} in total.", "Total investment is put at {investment}."),
        r.line("phase_one", "That comes on top of the {phase_one} the company spent on the first phase.",
               "The first phase, finished two years ago, cost {phase_one}."),
        r.line("jobs", "The site is expected to create {jobs} jobs.", "It should bring {jobs} new jobs to the region."),
        r.line("staff", "The company already employs {staff} people in the state."),
        r.line("open_date", "Production is scheduled to start on {open_date}.", "The facility is due to open on {open_date}."),
        r.line("announce_date", "The plan was made public on {announce_date}."),
        r.line("subsidy", "The state will cover {subsidy} of the cost through tax credits."),
        r.line("spokesperson", '"This is our biggest bet yet," said {spokesperson}, the company\'s {title}.',
               '{spokesperson}, {title} at {organization}, called the site "a perfect fit."'),
        r.line("official", '{official_title} {official} welcomed the decision: "This is great news for our workers."'),
        _sector_en(r),
    ]


def _sector_en(r):
    return r.by_value("category", {"energy": ["The move is part of a wider push into clean energy."],
                                   "technology": ["Demand for computing capacity has surged across the tech sector."],
                                   "logistics": ["Online retail growth has strained logistics networks."],
                                   "healthcare": ["The campus will focus on drug research."],
                                   "manufacturing": ["Carmakers are racing to expand manufacturing capacity."]})


def _body_zh(r):
    return [
        r.say("{announce_date}，{organization}宣布将投资{investment}在{city}建设{project}。", "{organization}宣布在{city}新建{project}。",
              "{organization}计划投资{investment}，在{city}落地{project}。", "{organization}近日宣布新建{project}。"),
        r.line("investment", "项目总投资{investment}。", "该项目计划总投资{investment}。"),
        r.line("phase_one", "此前一期工程已投入{phase_one}。"),
        r.line("jobs", "项目建成后预计新增就业岗位{jobs}个。", "预计可带动{jobs}人就业。"),
        r.line("staff", "该公司目前在当地已有员工{staff}人。"),
        r.line("open_date", "项目预计于{open_date}投产。", "计划{open_date}正式投用。"),
        r.line("announce_date", "消息于{announce_date}对外发布。"),
        r.line("subsidy", "地方政府将承担{subsidy}的建设费用。"),
        r.line("spokesperson", "{organization}{title}{spokesperson}表示：“这是公司迄今最大的一笔投资。”",
               "公司{title}{spokesperson}介绍，选址综合考虑了产业配套。"),
        r.line("official", "{official_title}{official}表示，欢迎企业扎根本地。"),
        _sector_zh(r),
    ]


def _sector_zh(r):
    return r.by_value("category", {"energy": ["这是公司布局新能源的重要一步。"], "technology": ["近年来算力需求快速增长。"],
                                   "logistics": ["电商发展对物流网络提出了更高要求。"], "healthcare": ["新中心将聚焦新药研发。"],
                                   "manufacturing": ["车企正加速扩充产能。"]})


def _headline(r, lang):
    en = ("{organization} to invest {investment} in {city} {project}", "{organization} picks {city} for new {project}",
          "{city} lands {organization} {project}", "{organization} unveils plans for new {project}")
    zh = ("{organization}拟投资{investment}在{city}建{project}", "{organization}{project}落户{city}",
          "{city}迎来{organization}{project}", "{organization}宣布新建{project}")
    return r.capture("headline", r.say(*(zh if lang == "zh" else en)))


def en_headline(r):
    title = _headline(r, "en")
    dateline = r.say("{city} (Staff report) -", "{city} -")
    return lines([title, "", f"{dateline} {prose(_body_en(r), 'en')}"])


def zh_headline(r):
    title = _headline(r, "zh")
    return lines([title, "", r.pick(["本报讯 ", "【本报讯】", "记者报道："]) + prose(_body_zh(r), "zh")])


def en_brief(r):
    return prose([r.pick(["In brief:", "Business briefing:", ""]), *_body_en(r)], "en")


def zh_brief(r):
    return r.pick(["【快讯】", "简讯：", ""]) + prose(_body_zh(r), "zh")


def en_bullets(r):
    return lines([
        r.say("Key facts: {organization}'s new {project}", "What we know about the {project} in {city}"),
        *bullets([r.line("organization", "Company: {organization}"), r.line("city", "Location: {city}"),
                  r.line("investment", "Investment: {investment}", near=("Investment: not disclosed",)),
                  r.line("phase_one", "Phase one cost: {phase_one}"), r.line("jobs", "New jobs: {jobs}"),
                  r.line("staff", "Current workforce: {staff}"), r.line("open_date", "Opening: {open_date}", near=("Opening: TBD",)),
                  r.line("announce_date", "Announced: {announce_date}"), r.line("subsidy", "State share of cost: {subsidy}"),
                  r.line("spokesperson", "Company contact: {spokesperson} ({title})"),
                  r.line("official", "Local reaction: {official_title} {official} welcomed the plan")], r.pick(["- ", "* "])),
        _sector_en(r),
    ])


def zh_bullets(r):
    return lines([
        r.say("要点速览｜{organization}{project}", "{city}{project}项目要点"),
        *bullets([r.line("organization", "投资方：{organization}"), r.line("city", "地点：{city}"),
                  r.line("investment", "投资额：{investment}", near=("投资额：未披露",)), r.line("phase_one", "一期投资：{phase_one}"),
                  r.line("jobs", "新增岗位：{jobs}个"), r.line("staff", "现有员工：{staff}人"),
                  r.line("open_date", "投产时间：{open_date}", near=("投产时间：待定",)),
                  r.line("announce_date", "发布时间：{announce_date}"), r.line("subsidy", "政府补贴：{subsidy}"),
                  r.line("spokesperson", "企业发言人：{spokesperson}（{title}）"),
                  r.line("official", "地方回应：{official_title}{official}表示欢迎")], r.pick(["· ", "- ", "● "])),
        _sector_zh(r),
    ])


def en_qa(r):
    who = r.line("spokesperson", "{spokesperson}, {title} of {organization}") or "a company executive"
    return lines([
        r.say("Interview: why {organization} chose {city}"), r.say(f"We spoke with {who} about the new {{project}}."),
        r.line("investment", "Q: How big is the investment? A: {investment} in total.",
               near=("Q: How big is the investment? A: We're not disclosing that yet.",)),
        r.line("phase_one", "Q: And the first phase? A: That was {phase_one}."),
        r.line("jobs", "Q: How many jobs? A: About {jobs} new positions."),
        r.line("staff", "Q: How many people do you employ here today? A: {staff}."),
        r.line("open_date", "Q: When will it open? A: We're targeting {open_date}.",
               near=("Q: When will it open? A: It's too early to say.",)),
        r.line("subsidy", "Q: Is the government helping? A: The state covers {subsidy} of the cost."),
        r.line("announce_date", "(The project was announced on {announce_date}.)"),
        r.line("official", "{official_title} {official} also attended the announcement."),
        r.line("city", "The site is in {city}."), _sector_en(r),
    ])


def zh_qa(r):
    who = r.line("spokesperson", "{organization}{title}{spokesperson}") or "企业负责人"
    return lines([
        r.say("专访｜{organization}为何选择{city}"), r.say(f"记者就新建{{project}}一事采访了{who}。"),
        r.line("investment", "问：投资规模多大？答：总投资{investment}。", near=("问：投资规模多大？答：暂时不便透露。",)),
        r.line("phase_one", "问：一期呢？答：一期投了{phase_one}。"), r.line("jobs", "问：能带来多少岗位？答：大约{jobs}个。"),
        r.line("staff", "问：目前当地有多少员工？答：{staff}人。"),
        r.line("open_date", "问：什么时候投产？答：目标是{open_date}。", near=("问：什么时候投产？答：现在说还太早。",)),
        r.line("subsidy", "问：政府有支持吗？答：政府承担{subsidy}的费用。"),
        r.line("announce_date", "（该项目于{announce_date}宣布。）"), r.line("official", "{official_title}{official}出席了签约仪式。"),
        r.line("city", "项目位于{city}。"), _sector_zh(r),
    ])


def en_kv(r):
    return lines([
        r.pick(["PROJECT FACT SHEET", "Press release - project summary"]),
        r.line("organization", "Company: {organization}"), r.line("project", "Project: {project}"), r.line("city", "Site: {city}"),
        r.line("investment", "Total investment: {investment}", near=("Total investment: undisclosed",)),
        r.line("phase_one", "Phase I (completed): {phase_one}"), r.line("jobs", "Jobs created: {jobs}"),
        r.line("staff", "Existing employees: {staff}"), r.line("subsidy", "Public funding: {subsidy}"),
        r.line("open_date", "Target opening: {open_date}"), r.line("announce_date", "Release date: {announce_date}"),
        r.line("spokesperson", "Media contact: {spokesperson}, {title}"), r.line("official", "Government liaison: {official}"),
        _sector_en(r),
    ])


def zh_kv(r):
    sep = r.pick(["：", " | "])
    rows = [("投资方", r.line("organization", "{organization}")), ("项目", r.line("project", "{project}")),
            ("地点", r.line("city", "{city}")), ("总投资", r.line("investment", "{investment}", near=("未披露",))),
            ("一期投资", r.line("phase_one", "{phase_one}")), ("新增岗位", r.line("jobs", "{jobs}个")),
            ("现有员工", r.line("staff", "{staff}人")), ("补贴比例", r.line("subsidy", "{subsidy}")),
            ("预计投产", r.line("open_date", "{open_date}")), ("发布日期", r.line("announce_date", "{announce_date}")),
            ("联系人", r.line("spokesperson", "{spokesperson}（{title}）")), ("政府对接", r.line("official", "{official}"))]
    return lines([r.pick(["项目概况", "新闻通稿·项目信息"]), *[f"{k}{sep}{t}" for k, t in rows if t], _sector_zh(r)])


TEMPLATES = {"en": {"headline": en_headline, "brief": en_brief, "bullets": en_bullets, "qa": en_qa, "kv": en_kv},
             "zh": {"headline": zh_headline, "brief": zh_brief, "bullets": zh_bullets, "qa": zh_qa, "kv": zh_kv}}
RESERVED = {"en": "kv", "zh": "qa"}
