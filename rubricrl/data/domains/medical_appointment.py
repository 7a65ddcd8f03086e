"""Medical appointments and visit notes: new vs original date, check-in vs appointment time,
copay vs amount insurance covers, doctor vs receptionist, dosage in mg (or g)."""

from __future__ import annotations

from rubricrl.data.domains import values as v
from rubricrl.data.domains.base import Conv, Field, bullets, lines, prose

NAME = "medical_appointment"
TOPICS = {"en": ("appointment message", "clinic note", "appointment record"), "zh": ("预约信息", "就诊记录", "门诊通知")}
DEPARTMENTS = ("cardiology", "dermatology", "orthopedics", "pediatrics", "general_practice", "ophthalmology")

FIELDS = [
    Field("patient", "text", ("patient_name", "patient"), ("Patient's name", "患者姓名"), p_absent=0.1, p_schema=0.7),
    Field("doctor", "text", ("doctor", "physician", "doctor_name"), ("Treating doctor", "接诊医生"), p_absent=0.15, p_schema=0.6),
    Field("staff", "text", ("receptionist", "scheduler"), ("Staff member who booked it", "预约登记人员"), p_absent=0.5, p_schema=0.15),
    Field("clinic", "text", ("clinic", "hospital", "facility"), ("Clinic or hospital", "医院/诊所"), p_absent=0.15, p_schema=0.45),
    Field("department", "enum", ("department", "specialty"), ("Department", "科室"), p_absent=0.1, p_schema=0.5, enum=DEPARTMENTS),
    Field("reason", "text", ("reason", "reason_for_visit", "complaint"), ("Reason for the visit", "就诊原因"), p_absent=0.2, p_schema=0.45),
    Field("date", "date", ("appointment_date", "date", "visit_date"), ("Appointment date (current)", "就诊日期（以最新为准）"), p_schema=0.75),
    Field("old_date", "date", ("original_date", "previous_appointment_date"), ("Date before rescheduling", "改约前日期"),
          p_absent=0.5, p_schema=0.15),
    Field("time", "time", ("appointment_time", "time", "visit_time"), ("Appointment time", "就诊时间"), p_absent=0.1, p_schema=0.6),
    Field("checkin", "time", ("check_in_time", "arrival_time"), ("When to check in", "签到时间"), p_absent=0.5, p_schema=0.15),
    Field("copay", "money", ("copay", "patient_cost", "fee"), ("What the patient pays", "患者自付费用"), p_absent=0.35, p_schema=0.45),
    Field("covered", "money", ("insurance_covered", "covered_amount"), ("What insurance pays", "医保/保险支付"), p_absent=0.5, p_schema=0.2),
    Field("fasting", "bool", ("fasting_required", "must_fast", "fasting"), ("Whether the patient must fast", "是否需要空腹"),
          p_absent=0.45, p_schema=0.35),
    Field("medications", "list", ("medications", "current_medications", "prescriptions"), ("Medications mentioned", "所用药物"),
          p_absent=0.35, p_schema=0.4),
    Field("dosage", "qty", ("dosage", "dose", "dose_mg"), ("Dose of the main medication", "主要药物剂量"), p_absent=0.5, p_schema=0.3,
          conv=(Conv(("dose_g", "dosage_grams"), 1e-3, ("grams", "克"), False, "mg"),)),
    Field("bp", "text", ("blood_pressure", "bp"), ("Blood pressure reading, as written", "血压（按原文）"), p_absent=0.55, p_schema=0.3),
    Field("follow_up", "int", ("follow_up_weeks", "next_visit_in_weeks"), ("Weeks until the follow-up", "几周后复诊"),
          p_absent=0.5, p_schema=0.3),
    Field("phone", "text", ("clinic_phone", "phone", "contact_number"), ("Number to call", "联系电话"), p_absent=0.4, p_schema=0.35),
]

DISTRACTORS = {"date": [("old_date", "old_vs_new_value")], "time": [("checkin", "neighbouring_value")],
               "copay": [("covered", "neighbouring_value")], "doctor": [("staff", "two_people")], "patient": [("staff", "two_people")]}

NEAR = {
    "en": {"copay": ["Your insurance may cover part of the cost."], "fasting": ["Ask the nurse whether you need to fast."],
           "dosage": ["Keep taking your usual dose until the visit."], "follow_up": ["A follow-up will be scheduled if needed."],
           "bp": ["Your blood pressure will be checked at the visit."]},
    "zh": {"copay": ["部分费用可走医保报销。"], "fasting": ["是否需要空腹请咨询护士。"], "dosage": ["就诊前按原剂量服药。"],
           "follow_up": ["如有需要会另行安排复诊。"], "bp": ["就诊时会测量血压。"]},
}

CLINICS = {"en": ("Riverside Family Clinic", "St. Mary's Medical Center", "Northgate Health Partners", "Lakeview Specialty Clinic"),
           "zh": ("仁和医院", "市第一人民医院", "协和门诊部", "康宁社区卫生服务中心")}
REASONS = {"en": {"cardiology": "chest tightness", "dermatology": "skin rash", "orthopedics": "persistent knee pain",
                  "pediatrics": "recurring fever", "general_practice": "annual check-up", "ophthalmology": "blurred vision"},
           "zh": {"cardiology": "胸闷心悸", "dermatology": "手臂皮疹", "orthopedics": "膝盖疼痛", "pediatrics": "反复发烧",
                  "general_practice": "年度体检", "ophthalmology": "视力模糊"}}
DRUGS = {"en": ("metformin", "lisinopril", "atorvastatin", "ibuprofen", "amoxicillin"), "zh": ("二甲双胍", "阿托伐他汀", "布洛芬", "阿莫西林", "氨氯地平")}
_DEPT_EN = {"cardiology": "Cardiology", "dermatology": "Dermatology", "orthopedics": "Orthopedics", "pediatrics": "Pediatrics",
            "general_practice": "General Practice", "ophthalmology": "Ophthalmology"}
_DEPT_ZH = {"cardiology": "心内科", "dermatology": "皮肤科", "orthopedics": "骨科", "pediatrics": "儿科", "general_practice": "全科",
            "ophthalmology": "眼科"}


def sample(rng, lang):
    dept = rng.choice(DEPARTMENTS)
    patient, doctor, staff = v.people(rng, lang, 3)
    new = v.random_date(rng, 2026)
    h, m = rng.randint(8, 16), rng.choice([0, 15, 30, 45])
    drugs = rng.sample(DRUGS[lang], rng.randint(1, 3))
    copay = float(rng.choice([20, 25, 35, 40, 50])) if lang == "en" else float(rng.choice([15, 25, 50, 80]))
    return {
        "patient": v.text(patient), "doctor": v.text(doctor), "staff": v.text(staff), "clinic": v.text(rng.choice(CLINICS[lang])),
        "department": v.flag(dept), "reason": v.text(REASONS[lang][dept]),
        "date": v.date(rng, *new, lang, weekday=rng.random() < 0.4),
        "old_date": v.date(rng, *v.shift_date(new, -rng.randint(2, 10)), lang),
        "time": v.time(rng, h, m, lang), "checkin": v.time(rng, h - 1 if m < 15 else h, (m - 15) % 60, lang),
        "copay": v.money(rng, copay, lang), "covered": v.money(rng, copay * rng.choice([3, 4, 6]) + rng.choice([0, 5]), lang),
        "fasting": v.flag(rng.random() < 0.4), "medications": v.items(rng, drugs, lang),
        "dosage": v.qty(rng, rng.choice([250, 500, 850, 1000]), "mg", lang),
        "bp": v.text(f"{rng.randint(110, 150)}/{rng.randint(70, 95)} mmHg"), "follow_up": v.count(rng.choice([2, 4, 6, 8])),
        "phone": v.text(f"({rng.randint(201, 989)}) 555-{rng.randint(200, 299):04d}" if lang == "en"
                        else f"0{rng.choice([10, 21, 20, 28])}-{rng.randint(6000, 8999)}{rng.randint(1000, 9999)}"),
    }


def _fast_en(r):
    return r.by_value("fasting", {True: ["Please do not eat or drink anything except water for 8 hours before the visit."],
                                  False: ["No fasting is needed."]})


def _fast_zh(r):
    return r.by_value("fasting", {True: ["就诊前需空腹8小时。"], False: ["无需空腹。"]})


def en_sms(r):
    return prose([
        r.say("{clinic}: Hi {patient}, your appointment with Dr. {doctor} is confirmed for {date} at {time}.",
              "Reminder from {clinic}: you're booked with Dr. {doctor} on {date}.", "Your appointment is confirmed for {date}."),
        r.line("old_date", "(Moved from {old_date}.)"), r.line("time", "Time: {time}."), r.line("checkin", "Please check in by {checkin}."),
        r.by_value("department", {k: [f"Department: {t}."] for k, t in _DEPT_EN.items()}), _fast_en(r),
        r.line("copay", "Your copay is {copay}."), r.line("doctor", "You'll see Dr. {doctor}."), r.line("clinic", "Location: {clinic}."),
        r.line("phone", "To reschedule call {phone}.", "Questions? {phone}"), r.line("patient", "Patient: {patient}."),
    ], "en")


def en_letter(r):
    return lines([
        r.say("Dear {patient},", "Dear patient,"),
        prose([r.say("This letter confirms your visit to {clinic}.", "This letter confirms your upcoming visit."),
               r.line("old_date", "As discussed, your appointment has been moved from {old_date} to {date}.",
                      "Your appointment on {old_date} has been rescheduled to {date}."),
               r.line("date", "Your appointment is on {date}."), r.line("time", "The appointment is at {time}."),
               r.line("checkin", "Check-in opens at {checkin}."), r.line("doctor", "You will be seen by Dr. {doctor}."),
               r.by_value("department", {k: [f"The appointment is with our {t} department."] for k, t in _DEPT_EN.items()}),
               r.line("reason", "Reason for the visit: {reason}."), _fast_en(r),
               r.line("medications", "Please bring your {medications}.", "Bring a list of your medications ({medications})."),
               r.line("dosage", "Continue your usual dose of {dosage}."),
               r.line("copay", "Your share of the cost is {copay}; your insurer covers {covered}.", "Your share of the cost is {copay}."),
               r.line("covered", "Insurance will pay {covered}."), r.line("staff", "This booking was made by {staff}."),
               r.line("phone", "Call us at {phone} if you need to change it.")], "en"),
        r.line("clinic", "Sincerely,\n{clinic}", "Kind regards,\nThe team at {clinic}"),
    ])


def en_note(r):
    return lines([
        r.pick(["VISIT NOTE", "Clinic note", "Outpatient summary"]),
        *bullets([r.line("patient", "Patient: {patient}"), r.line("date", "Date: {date}"), r.line("time", "Time: {time}"),
                  r.line("old_date", "Originally booked: {old_date}"),
                  r.by_value("department", {k: [f"Dept: {t}"] for k, t in _DEPT_EN.items()}),
                  r.line("doctor", "Physician: Dr. {doctor}"), r.line("reason", "Chief complaint: {reason}"),
                  r.line("bp", "BP: {bp}", near=("BP: to be measured",)), r.line("medications", "Current meds: {medications}"),
                  r.line("dosage", "Dose: {dosage}"), r.line("follow_up", "Follow-up in {follow_up} weeks", near=("Follow-up: as needed",)),
                  r.by_value("fasting", {True: ["Fasting labs ordered: NPO 8 h"], False: ["No fasting required"]}),
                  r.line("copay", "Copay collected: {copay}"), r.line("covered", "Billed to insurance: {covered}"),
                  r.line("clinic", "Site: {clinic}"), r.line("staff", "Scheduled by: {staff}"),
                  r.line("checkin", "Checked in: {checkin}"), r.line("phone", "Clinic phone: {phone}")], r.pick(["- ", "* "])),
    ])


def en_call(r):
    return lines([
        r.say("Receptionist: {clinic}, this is {staff} speaking.", "Receptionist: Good morning, {clinic}.",
              "Receptionist: Hello, how can I help?"),
        r.say("Caller: Hi, this is {patient}. I need an appointment. Reason: {reason}.", "Caller: Hi, I'd like to book an appointment."),
        r.line("patient", "Receptionist: Can I have your name?\nCaller: {patient}."),
        r.line("reason", "Receptionist: What's the reason for the visit?\nCaller: {reason}, mainly."),
        r.line("old_date", "Caller: I was booked for {old_date} but I can't make it.\nReceptionist: No problem, I've moved you to {date}."),
        r.line("date", "Receptionist: The next opening is {date}."),
        r.line("time", "Receptionist: At {time}, with Dr. {doctor}.", "Receptionist: At {time}."),
        r.line("doctor", "Receptionist: You'll see Dr. {doctor}."), r.line("checkin", "Receptionist: Please check in by {checkin}."),
        r.by_value("department", {k: [f"Receptionist: That's in {t}."] for k, t in _DEPT_EN.items()}),
        "Caller: Do I need to fast?\nReceptionist: " + _fast_en(r) if r.has("fasting") else "",
        r.line("copay", "Caller: What will it cost me?\nReceptionist: Your copay is {copay}.",
               near=("Receptionist: Insurance may cover part of it.",)),
        r.line("covered", "Receptionist: Your plan pays {covered}."), r.line("medications", "Receptionist: Bring your {medications}."),
        r.line("phone", "Receptionist: If anything changes, call {phone}."),
        r.line("staff", "Receptionist: My name is {staff}, by the way."),
    ])


def en_notice(r):
    return lines([
        r.say("APPOINTMENT RESCHEDULED", "Your appointment has changed") if r.has("old_date") else r.pick(["APPOINTMENT CONFIRMED",
                                                                                                        "Appointment details"]),
        r.line("old_date", "Previous date: {old_date}"), r.line("date", "Date: {date}"), r.line("time", "Time: {time}"),
        r.line("checkin", "Check-in: {checkin}"), r.line("clinic", "Location: {clinic}"), r.line("doctor", "Provider: Dr. {doctor}"),
        r.by_value("department", {k: [f"Department: {t}"] for k, t in _DEPT_EN.items()}), r.line("patient", "Patient: {patient}"),
        r.line("copay", "Estimated copay: {copay}"), r.line("covered", "Covered by insurance: {covered}"), _fast_en(r),
        r.line("phone", "Questions: {phone}"),
    ])


def zh_sms(r):
    return prose([
        r.say("【{clinic}】{patient}您好，您已预约{date}{time}{doctor}医生的门诊。", "【预约成功】您已成功预约{date}的门诊。"),
        r.line("old_date", "（原预约日期{old_date}已取消。）"), r.line("time", "就诊时间{time}。"), r.line("checkin", "请于{checkin}前签到。"),
        r.by_value("department", {k: [f"科室：{t}。"] for k, t in _DEPT_ZH.items()}), _fast_zh(r), r.line("copay", "挂号费{copay}。"),
        r.line("doctor", "接诊医生：{doctor}。"), r.line("clinic", "地点：{clinic}。"), r.line("phone", "如需改约请致电{phone}。"),
        r.line("patient", "就诊人：{patient}。"),
    ], "zh")


def zh_record(r):
    return lines([
        r.pick(["门诊病历摘要", "【就诊记录】"]),
        *bullets([r.line("patient", "姓名：{patient}"), r.line("date", "就诊日期：{date}"), r.line("time", "时间：{time}"),
                  r.line("old_date", "原定日期：{old_date}"), r.by_value("department", {k: [f"科室：{t}"] for k, t in _DEPT_ZH.items()}),
                  r.line("doctor", "医生：{doctor}"), r.line("reason", "主诉：{reason}"), r.line("bp", "血压：{bp}", near=("血压：待测",)),
                  r.line("medications", "用药：{medications}"), r.line("dosage", "剂量：{dosage}"),
                  r.line("follow_up", "{follow_up}周后复诊", near=("必要时复诊",)),
                  r.by_value("fasting", {True: ["复查需空腹"], False: ["无需空腹"]}), r.line("copay", "自付：{copay}"),
                  r.line("covered", "医保支付：{covered}"), r.line("clinic", "医院：{clinic}"), r.line("staff", "登记：{staff}"),
                  r.line("checkin", "签到：{checkin}"), r.line("phone", "电话：{phone}")], r.pick(["- ", "· "])),
    ])


def zh_call(r):
    return lines([
        r.say("导诊台：您好，{clinic}，我是{staff}。", "导诊台：您好，{clinic}预约中心。", "导诊台：您好，请问需要什么帮助？"),
        r.say("患者：你好，我是{patient}，因为{reason}想挂个号。", "患者：你好，我想预约门诊。"),
        r.line("patient", "导诊台：请问您的姓名？\n患者：{patient}。"), r.line("reason", "导诊台：看什么问题？\n患者：{reason}。"),
        r.line("old_date", "患者：我原来约的是{old_date}，去不了了。\n导诊台：好的，给您改到{date}。"),
        r.line("date", "导诊台：最近可以约{date}。"), r.line("time", "导诊台：{time}，{doctor}医生。", "导诊台：时间是{time}。"),
        r.line("doctor", "导诊台：是{doctor}医生接诊。"), r.line("checkin", "导诊台：请{checkin}前到签到。"),
        r.by_value("department", {k: [f"导诊台：挂的是{t}。"] for k, t in _DEPT_ZH.items()}),
        "患者：要空腹吗？\n导诊台：" + _fast_zh(r) if r.has("fasting") else "",
        r.line("copay", "患者：挂号费多少？\n导诊台：{copay}。", near=("导诊台：部分费用可以走医保。",)),
        r.line("covered", "导诊台：医保能报{covered}。"), r.line("medications", "导诊台：记得带上{medications}。"),
        r.line("phone", "导诊台：有变动请打{phone}。"), r.line("staff", "导诊台：我是{staff}，有事找我。"),
    ])


def zh_notice(r):
    title = r.say("就诊时间变更通知", "改约通知") if r.has("old_date") else r.pick(["预约确认单", "门诊预约信息"])
    return lines([title, prose([
        r.say("{patient}您好：", "您好："), r.line("old_date", "您原定于{old_date}的门诊已改至{date}。"), r.line("date", "就诊日期：{date}。"),
        r.line("time", "就诊时间：{time}。"), r.line("checkin", "请于{checkin}前签到。"), r.line("clinic", "地点：{clinic}。"),
        r.line("doctor", "接诊医生：{doctor}。"), r.by_value("department", {k: [f"科室：{t}。"] for k, t in _DEPT_ZH.items()}),
        r.line("copay", "预计自付{copay}。"), r.line("covered", "医保支付{covered}。"), _fast_zh(r), r.line("phone", "咨询电话：{phone}。")],
        "zh")])


TEMPLATES = {"en": {"sms": en_sms, "letter": en_letter, "note": en_note, "call": en_call, "notice": en_notice},
             "zh": {"sms": zh_sms, "record": zh_record, "call": zh_call, "notice": zh_notice}}
RESERVED = {"en": "call", "zh": "call"}
