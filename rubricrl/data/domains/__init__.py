"""The domains of the generated data set, in a fixed order (DOMAINS and ids depend on it).

A domain module defines NAME; TOPICS (what instructions call its texts, per language); FIELDS
(base.Field: what a schema may ask); DISTRACTORS (field -> [(other field, hard-case tag)]: the tag
applies when the other field's value is in the text too); NEAR (per language, field -> sentences
that almost mention it); sample(rng, lang) -> {key: Fact}; TEMPLATES (per language, name ->
function rendering a base.Record to text, at least 4) and RESERVED (per language, the template
kept for the test split).
"""

from rubricrl.data.domains import (customer_service, earnings_report, flight_booking, job_posting, medical_appointment, news,
                                   product_review, real_estate, restaurant_review)

ALL = (product_review, customer_service, news, job_posting, real_estate, restaurant_review, flight_booking, earnings_report,
       medical_appointment)
BY_NAME = {m.NAME: m for m in ALL}
