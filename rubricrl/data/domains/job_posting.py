"""Job postings: salary ranges (annual dollars, monthly k/万), signing bonus next to the salary,
contact person vs hiring manager, posting date vs application deadline."""

from __future__ import annotations

from rubricrl.data.domains import values as v
from rubricrl.data.domains.base import Conv, Fact, Field, bullets, lines, prose

NAME = "job_posting"
TOPICS = {"en": ("job posting", "job ad", "vacancy notice"), "zh": ("招聘启事", "职位描述", "招聘信息")}

FIELDS = [
    Field("job_title", "text", ("job_title", "title", "position", "role"), ("Job title", "职位名称"), p_schema=0.85),
    Field("company", "text", ("company", "employer", "company_name"), ("Hiring company", "招聘公司"), p_schema=0.6),
    Field("city", "text", ("location", "city", "work_location"), ("Where the job is", "工作地点"), p_absent=0.1),
    Field("salary_min", "money", ("salary_min", "min_salary", "salary_from"), ("Lower end of the salary range", "薪资下限"),
          p_absent=0.25, p_schema=0.6, conv=(Conv(("salary_min_k", "min_salary_thousands"), 1e-3, ("thousands", "千元")),)),
    Field("salary_max", "money", ("salary_max", "max_salary", "salary_to"), ("Upper end of the salary range", "薪资上限"),
          p_absent=0.0, p_schema=0.5, requires="salary_min",
          conv=(Conv(("salary_max_k", "max_salary_thousands"), 1e-3, ("thousands", "千元")),)),
    Field("salary_period", "enum", ("salary_period", "pay_period"), ("What the salary is per", "薪资周期"),
          p_schema=0.3, implied_by=("salary_min",), enum=("year", "month")),
    Field("bonus", "money", ("signing_bonus", "sign_on_bonus"), ("One-off signing bonus", "签约奖金"), p_absent=0.55, p_schema=0.2),
    Field("employment_type", "enum", ("employment_type", "job_type", "contract_type"), ("Kind of contract", "用工类型"),
          p_absent=0.1, p_schema=0.5, enum=("full_time", "part_time", "contract", "internship")),
    Field("work_mode", "enum", ("work_mode", "workplace_type", "remote_policy"), ("On-site, hybrid or remote", "办公方式"),
          p_absent=0.3, p_schema=0.4, enum=("onsite", "hybrid", "remote")),
    Field("experience", "int", ("min_experience_years", "years_experience", "experience_years"),
          ("Minimum years of experience", "最低工作年限"), p_absent=0.3, p_schema=0.5),
    Field("skills", "list", ("skills", "required_skills", "requirements"), ("Required skills", "技能要求"),
          p_absent=0.15, p_schema=0.55),
    Field("benefits", "list", ("benefits", "perks"), ("Benefits offered", "福利待遇"), p_absent=0.4, p_schema=0.3),
    Field("contact", "text", ("contact_name", "recruiter", "contact_person"), ("Who to contact about the job", "联系人"),
          p_absent=0.35, p_schema=0.45),
    Field("manager", "text", ("hiring_manager", "reports_to"), ("Manager the hire reports to", "直属上级"),
          p_absent=0.5, p_schema=0.15),
    Field("email", "text", ("contact_email", "apply_email", "email"), ("Where to send applications", "投递邮箱"),
          p_absent=0.35, p_schema=0.4),
    Field("deadline", "date", ("application_deadline", "deadline", "apply_by"), ("Last day to apply", "截止日期"),
          p_absent=0.4, p_schema=0.45),
    Field("posted", "date", ("posted_date", "date_posted"), ("When the ad was posted", "发布日期"), p_absent=0.5, p_schema=0.2),
    Field("headcount", "int", ("openings", "headcount", "positions_available"), ("Number of people hired", "招聘人数"),
          p_absent=0.5, p_schema=0.3),
]

DISTRACTORS = {"salary_min": [("bonus", "neighbouring_value")], "salary_max": [("bonus", "neighbouring_value")],
               "contact": [("manager", "two_people")], "deadline": [("posted", "neighbouring_value")]}

NEAR = {
    "en": {"salary_min": ["Salary is competitive and depends on experience."],
           "deadline": ["Applications are reviewed on a rolling basis."],
           "experience": ["Previous experience in a similar role is a plus."],
           "contact": ["Questions? Reach out to our recruiting team."]},
    "zh": {"salary_min": ["薪资面议，具体根据经验确定。"], "deadline": ["招满即止。"], "experience": ["有相关工作经验者优先。"],
           "contact": ["如有疑问请联系人力资源部。"]},
}

JOBS = {"en": [("Senior Data Engineer", ["Python", "SQL", "Spark", "Airflow"]), ("Registered Nurse", ["BLS certification",
                "patient assessment", "Epic charting"]), ("Marketing Coordinator", ["copywriting", "HubSpot", "Google Analytics"]),
               ("Backend Developer", ["Go", "PostgreSQL", "Kubernetes", "REST APIs"]), ("Warehouse Supervisor",
                ["forklift certification", "inventory management", "team leadership"]), ("UX Designer", ["Figma",
                "user research", "prototyping"])],
        "zh": [("高级数据工程师", ["Python", "SQL", "Spark", "数据仓库"]), ("运营专员", ["活动策划", "数据分析", "文案撰写"]),
               ("前端开发工程师", ["React", "TypeScript", "小程序开发"]), ("财务主管", ["财务报表", "税务筹划", "用友软件"]),
               ("销售经理", ["客户开发", "谈判能力", "团队管理"]), ("UI设计师", ["Figma", "视觉设计", "交互设计"])]}
COMPANIES = {"en": ("Brightline Health", "Orbital Labs", "Maple & Finch", "Copperleaf Software", "Harbor Freight Co."),
             "zh": ("云帆科技有限公司", "智联创新", "蓝鲸文化传媒", "星河网络科技", "拓普咨询")}
BENEFITS = {"en": ("health insurance", "401(k) match", "25 days of paid leave", "learning budget", "free lunch"),
            "zh": ("五险一金", "年终奖", "带薪年假", "免费午餐", "定期体检")}


def _salary_zh(amount: float, style: int) -> Fact:
    return Fact(amount, [f"{v.short(amount / 1000)}k", f"{v.short(amount / 10000)}万", f"{int(amount)}元"][style], "CNY")


def sample(rng, lang):
    title, skills = rng.choice(JOBS[lang])
    contact, manager = v.people(rng, lang, 2)
    posted = v.random_date(rng, 2026)
    facts = {
        "job_title": v.text(title), "company": v.text(rng.choice(COMPANIES[lang])), "city": v.text(v.city(rng, lang)),
        "employment_type": v.flag(rng.choice(["full_time", "full_time", "part_time", "contract", "internship"])),
        "work_mode": v.flag(rng.choice(["onsite", "hybrid", "remote"])),
        "experience": v.count(rng.choice([1, 2, 3, 5, 8]), lang == "zh" and rng.random() < 0.4),
        "skills": v.items(rng, rng.sample(skills, rng.randint(2, min(4, len(skills)))), lang),
        "benefits": v.items(rng, rng.sample(BENEFITS[lang], rng.randint(2, 3)), lang),
        "contact": v.text(contact), "manager": v.text(manager),
        "deadline": v.date(rng, *v.shift_date(posted, rng.randint(14, 40)), lang), "posted": v.date(rng, *posted, lang),
        "headcount": v.count(rng.choice([1, 2, 3, 5]), lang == "zh" and rng.random() < 0.4),
    }
    if lang == "zh":
        low = rng.choice([8, 10, 12, 15, 18, 20]) * 1000.0
        style = rng.randrange(3)
        facts["salary_min"], facts["salary_max"] = _salary_zh(low, style), _salary_zh(low * rng.choice([1.5, 2]), style)
        facts["bonus"] = v.money(rng, rng.choice([5000.0, 10000.0, 20000.0]), lang)
        facts["salary_period"] = v.flag("month")
        facts["email"] = v.text(f"hr{rng.randint(10, 99)}@{rng.choice(['yunfan', 'zhilian', 'bluewhale'])}.cn")
    else:
        low = rng.choice([48, 62, 75, 88, 95, 110, 130]) * 1000.0
        style = rng.randrange(4)  # both ends of a range are written alike
        facts["salary_min"] = v.money(rng, low, lang, style=style)
        facts["salary_max"] = v.money(rng, low + rng.choice([15, 20, 25, 30]) * 1000.0, lang, style=style)
        facts["bonus"] = v.money(rng, rng.choice([2500.0, 5000.0, 7500.0]), lang)
        facts["salary_period"] = v.flag("year")
        facts["email"] = v.text(f"{rng.choice(['careers', 'jobs', 'talent'])}@"
                                f"{rng.choice(['orbitallabs.com', 'brightline.org', 'copperleaf.io'])}")
    return facts


_TYPE_EN = {"full_time": ["This is a full-time position."], "part_time": ["This is a part-time role (20 hours a week)."],
            "contract": ["This is a 12-month contract role."], "internship": ["This is a paid internship."]}
_MODE_EN = {"onsite": ["The role is fully on-site."], "hybrid": ["We work hybrid: three days in the office."],
            "remote": ["The role is fully remote."]}
_TYPE_ZH = {"full_time": ["全职岗位。"], "part_time": ["兼职岗位。"], "contract": ["合同制，期限一年。"], "internship": ["实习岗位，带薪。"]}
_MODE_ZH = {"onsite": ["需坐班。"], "hybrid": ["混合办公，每周到岗三天。"], "remote": ["可远程办公。"]}


def _pay_en(r):
    return r.line("salary_min", "The salary range is {salary_min} - {salary_max} per year.",
                  "Pay: {salary_min} to {salary_max} annually.", "We offer {salary_min}–{salary_max} a year.")


def _pay_zh(r):
    # No bare "-" between the bounds: grounding reads "元-1.6万" as minus 1.6万.
    return r.line("salary_min", "薪资{salary_min}~{salary_max}/月。", "月薪{salary_min}至{salary_max}。",
                  "月薪{salary_min}到{salary_max}。")


def en_prose(r):
    return prose([
        r.say("{company} is hiring a {job_title} in {city}.", "Join {company} as our next {job_title}.",
              "We're looking for a {job_title} to join our team."),
        r.line("city", "The position is based in {city}."), r.line("headcount", "We have {headcount} openings."),
        r.by_value("employment_type", _TYPE_EN), r.by_value("work_mode", _MODE_EN),
        r.line("experience", "You have at least {experience} years of relevant experience.",
               "You bring {experience}+ years of experience."),
        r.line("skills", "You know your way around {skills}.", "You're comfortable with {skills}."), _pay_en(r),
        r.line("bonus", "There's also a {bonus} signing bonus."), r.line("benefits", "Benefits include {benefits}."),
        r.line("manager", "You'll report to {manager}."), r.line("posted", "Posted {posted}."),
        r.line("contact", "Send your CV to {contact} at {email}.", "For questions, contact {contact}."),
        r.line("email", "Apply by e-mail: {email}."), r.line("deadline", "Applications close on {deadline}."),
    ], "en")


def en_bullets(r):
    return lines([
        r.say("{job_title} - {company}", "Now hiring: {job_title}"), r.line("company", "Company: {company}"),
        "About the role:", *bullets([r.line("city", "Location: {city}"), r.by_value("employment_type", _TYPE_EN),
                                     r.by_value("work_mode", _MODE_EN), _pay_en(r), r.line("bonus", "Signing bonus: {bonus}"),
                                     r.line("headcount", "Openings: {headcount}"), r.line("manager", "Reports to: {manager}")], "- "),
        "What you bring:", *bullets([r.line("experience", "{experience}+ years of experience"),
                                     r.line("skills", "Skills: {skills}")], "- "),
        *bullets([r.line("benefits", "Perks: {benefits}")], "- "),
        r.line("contact", "Contact: {contact} ({email})", "Recruiter: {contact}"), r.line("email", "Apply: {email}"),
        r.line("posted", "Posted on {posted}"), r.line("deadline", "Apply by {deadline}."),
    ])


def en_kv(r):
    return lines([
        r.say("Position: {job_title}"), r.line("company", "Employer: {company}"), r.line("city", "Location: {city}"),
        r.line("salary_min", "Salary: {salary_min} - {salary_max} / year", near=("Salary: DOE",)),
        r.line("bonus", "Sign-on bonus: {bonus}"), r.by_value("employment_type", {k: [f"Type: {k.replace('_', '-')}"] for k in _TYPE_EN}),
        r.by_value("work_mode", {k: [f"Workplace: {k}"] for k in _MODE_EN}),
        r.line("experience", "Experience: {experience}+ years"), r.line("skills", "Skills: {skills}"),
        r.line("benefits", "Benefits: {benefits}"), r.line("headcount", "Openings: {headcount}"),
        r.line("manager", "Hiring manager: {manager}"), r.line("contact", "Recruiter: {contact}"),
        r.line("email", "E-mail: {email}"), r.line("posted", "Posted: {posted}"),
        r.line("deadline", "Closing date: {deadline}", near=("Closing date: open until filled",)),
    ])


def en_qa(r):
    return lines([
        r.say("FAQ: {job_title} at {company}", "{job_title} - frequently asked questions"),
        r.line("city", "Where is the job? {city}."), r.line("salary_min", "What does it pay? {salary_min} to {salary_max} a year.",
                                                         near=("What does it pay? Competitive, depending on experience.",)),
        r.line("bonus", "Is there a bonus? Yes, a {bonus} signing bonus."),
        "Is it remote? " + r.by_value("work_mode", _MODE_EN) if r.has("work_mode") else "",
        "What kind of contract? " + r.by_value("employment_type", _TYPE_EN) if r.has("employment_type") else "",
        r.line("experience", "How much experience do I need? At least {experience} years."),
        r.line("skills", "Which skills matter most? {skills}."), r.line("benefits", "What are the benefits? {benefits}."),
        r.line("headcount", "How many people are you hiring? {headcount}."),
        r.line("contact", "Who do I talk to? {contact}, our recruiter."), r.line("manager", "Who is the manager? {manager}."),
        r.line("email", "How do I apply? Email {email}."), r.line("deadline", "Is there a deadline? Yes, {deadline}."),
        r.line("posted", "(Posted {posted})"),
    ])


def en_headline(r):
    return lines([
        r.say("We're hiring! {job_title} in {city}", "Career opportunity: {job_title}"),
        prose([r.say("{company} is growing and needs a {job_title}."), r.line("city", "Based in {city}."), _pay_en(r),
               r.line("bonus", "Plus a {bonus} signing bonus."), r.by_value("employment_type", _TYPE_EN),
               r.by_value("work_mode", _MODE_EN), r.line("skills", "Must know: {skills}."),
               r.line("experience", "Minimum {experience} years of experience."), r.line("benefits", "We offer {benefits}."),
               r.line("headcount", "{headcount} positions available."), r.line("manager", "Reporting to {manager}.")], "en"),
        prose([r.line("contact", "Contact {contact}."), r.line("email", "CVs to {email}."),
               r.line("posted", "Posted {posted}."), r.line("deadline", "Deadline: {deadline}.")], "en"),
    ])


def zh_prose(r):
    return prose([
        r.say("{company}诚聘{job_title}，工作地点{city}。", "{company}现招聘{job_title}。", "招聘{job_title}一名，欢迎加入。"),
        r.line("city", "工作地点：{city}。"), r.line("headcount", "招聘{headcount}人。"),
        r.by_value("employment_type", _TYPE_ZH), r.by_value("work_mode", _MODE_ZH),
        r.line("experience", "要求{experience}年以上相关经验。"), r.line("skills", "熟悉{skills}。"), _pay_zh(r),
        r.line("bonus", "入职另发签约奖金{bonus}。"), r.line("benefits", "福利：{benefits}。"),
        r.line("manager", "直接向{manager}汇报。"), r.line("posted", "发布日期：{posted}。"),
        r.line("contact", "有意者请联系{contact}，邮箱{email}。", "联系人：{contact}。"), r.line("email", "简历请投{email}。"),
        r.line("deadline", "报名截止{deadline}。"),
    ], "zh")


def zh_bullets(r):
    marker = r.pick(["- ", "· ", "● "])
    return lines([
        r.say("【{job_title}】{company}", "{company}招聘：{job_title}"), r.line("company", "公司：{company}"),
        "岗位信息：", *bullets([r.line("city", "地点：{city}"), r.by_value("employment_type", _TYPE_ZH), r.by_value("work_mode", _MODE_ZH),
                               _pay_zh(r), r.line("bonus", "签约奖金：{bonus}"), r.line("headcount", "人数：{headcount}人"),
                               r.line("manager", "汇报对象：{manager}")], marker),
        "任职要求：", *bullets([r.line("experience", "{experience}年以上工作经验"), r.line("skills", "掌握{skills}")], marker),
        *bullets([r.line("benefits", "福利：{benefits}")], marker),
        r.line("contact", "联系人：{contact}"), r.line("email", "投递邮箱：{email}"), r.line("posted", "发布：{posted}"),
        r.line("deadline", "截止：{deadline}"),
    ])


def zh_kv(r):
    sep = r.pick(["：", ": "])
    rows = [("职位", r.say("{job_title}")), ("公司", r.line("company", "{company}")), ("地点", r.line("city", "{city}")),
            ("薪资", r.line("salary_min", "{salary_min}~{salary_max}/月", "{salary_min}至{salary_max}/月", near=("面议",))),
            ("签约奖金", r.line("bonus", "{bonus}")),
            ("类型", r.by_value("employment_type", {"full_time": ["全职"], "part_time": ["兼职"], "contract": ["合同工"],
                                                    "internship": ["实习"]})),
            ("办公", r.by_value("work_mode", {"onsite": ["坐班"], "hybrid": ["混合办公"], "remote": ["远程"]})),
            ("经验", r.line("experience", "{experience}年以上")), ("技能", r.line("skills", "{skills}")),
            ("福利", r.line("benefits", "{benefits}")), ("人数", r.line("headcount", "{headcount}人")),
            ("上级", r.line("manager", "{manager}")), ("联系人", r.line("contact", "{contact}")), ("邮箱", r.line("email", "{email}")),
            ("发布日期", r.line("posted", "{posted}")), ("截止日期", r.line("deadline", "{deadline}", near=("招满即止",)))]
    return lines([r.pick(["职位信息", "招聘简章"]), *[f"{k}{sep}{t}" for k, t in rows if t]])


def zh_qa(r):
    return lines([
        r.say("{company}{job_title}岗位答疑", "关于{job_title}招聘的常见问题"),
        r.line("city", "问：在哪里上班？答：{city}。"),
        r.line("salary_min", "问：待遇怎样？答：月薪{salary_min}至{salary_max}。", near=("问：待遇怎样？答：面议。",)),
        r.line("bonus", "问：有签约奖金吗？答：有，{bonus}。"),
        "问：能远程吗？答：" + r.by_value("work_mode", _MODE_ZH) if r.has("work_mode") else "",
        "问：是什么用工形式？答：" + r.by_value("employment_type", _TYPE_ZH) if r.has("employment_type") else "",
        r.line("experience", "问：需要几年经验？答：{experience}年以上。"), r.line("skills", "问：看重哪些技能？答：{skills}。"),
        r.line("benefits", "问：有哪些福利？答：{benefits}。"), r.line("headcount", "问：招几个人？答：{headcount}人。"),
        r.line("contact", "问：找谁咨询？答：{contact}。"), r.line("manager", "问：向谁汇报？答：{manager}。"),
        r.line("email", "问：怎么投递？答：发邮件到{email}。"), r.line("deadline", "问：截止时间？答：{deadline}。"),
        r.line("posted", "（发布于{posted}）"),
    ])


def zh_headline(r):
    return lines([
        r.say("【急聘】{job_title}｜{city}", "{company}招贤纳士：{job_title}"),
        prose([r.say("{company}业务快速发展，现诚聘{job_title}。", "现诚聘{job_title}。"), r.line("city", "工作地点{city}。"),
               _pay_zh(r), r.line("bonus", "另有签约奖金{bonus}。"), r.by_value("employment_type", _TYPE_ZH),
               r.by_value("work_mode", _MODE_ZH), r.line("skills", "需熟练掌握{skills}。"),
               r.line("experience", "{experience}年以上经验。"), r.line("benefits", "提供{benefits}。"),
               r.line("headcount", "共招{headcount}人。"), r.line("manager", "向{manager}汇报。")], "zh"),
        prose([r.line("contact", "联系人{contact}。"), r.line("email", "简历投递：{email}。"),
               r.line("posted", "{posted}发布。"), r.line("deadline", "{deadline}截止。")], "zh"),
    ])


TEMPLATES = {"en": {"prose": en_prose, "bullets": en_bullets, "kv": en_kv, "qa": en_qa, "headline": en_headline},
             "zh": {"prose": zh_prose, "bullets": zh_bullets, "kv": zh_kv, "qa": zh_qa, "headline": zh_headline}}
RESERVED = {"en": "headline", "zh": "kv"}
