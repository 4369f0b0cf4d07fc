//! The demo platform's reviewed files: governance and pipelines, written as a team would.

/// `governance/metadata.toml`. `marketing.audience` and `ai.review_corpus` are left
/// unclassified on purpose: nobody has reviewed them yet.
pub const METADATA: &str = r#"# What each column holds. Reviewed by the data-protection team with each table's owner.
# Classifications: personal, sensitive, internal, public. A column nobody classified is treated
# as closed by the access policy and gets no statistics in manifests.

[tables."crm.learners"]
owner = "crm team"
source = "nightly export of the CRM application"
key = ["learner_id"]
[tables."crm.learners".columns]
learner_id = { classification = "internal", identifies = "learner" }
full_name = "personal"
email = "personal"
phone = "personal"
street_address = "personal"
city = "personal"
date_of_birth = "personal"
notes = "personal"
status = "internal"
marketing_consent = "internal"
ai_training_consent = "internal"
signed_up_at = "internal"

[tables."crm.instructors"]
owner = "crm team"
source = "the instructor onboarding form"
key = ["instructor_id"]
[tables."crm.instructors".columns]
instructor_id = "internal"
full_name = "personal"
email = "personal"
bio = "public"
joined_at = "internal"

[tables."learning.courses"]
owner = "learning team"
source = "the course authoring tool"
key = ["course_id"]
[tables."learning.courses".columns]
course_id = "public"
instructor_id = "internal"
title = "public"
category = "public"
price = "public"
published_at = "public"

[tables."learning.enrollments"]
owner = "learning team"
source = "the learning application's database"
key = ["enrollment_id"]
[tables."learning.enrollments".columns]
enrollment_id = "internal"
learner_id = { classification = "internal", identifies = "learner" }
course_id = "internal"
enrolled_at = "internal"
completed_at = "internal"

[tables."learning.events"]
owner = "learning team"
source = "the clickstream collector"
key = ["event_id"]
[tables."learning.events".columns]
event_id = "internal"
learner_id = { classification = "internal", identifies = "learner" }
course_id = "internal"
kind = "internal"
ip_address = "personal"
user_agent = "personal"
occurred_at = "internal"

[tables."learning.reviews"]
owner = "learning team"
source = "the learning application's database"
key = ["review_id"]
[tables."learning.reviews".columns]
review_id = "internal"
learner_id = { classification = "internal", identifies = "learner" }
course_id = "internal"
rating = "internal"
text = "personal"
written_at = "internal"

[tables."support.tickets"]
owner = "support team"
source = "the helpdesk"
key = ["ticket_id"]
[tables."support.tickets".columns]
ticket_id = "internal"
learner_id = { classification = "internal", identifies = "learner" }
opened_at = "internal"
status = "internal"
subject = "personal"
body = "personal"

[tables."billing.payments"]
owner = "finance team"
source = "the payment provider's settlement files"
key = ["payment_id"]
[tables."billing.payments".columns]
payment_id = "internal"
learner_id = { classification = "internal", identifies = "learner" }
amount = "sensitive"
currency = "internal"
card_number = { classification = "sensitive", note = "Should not be stored at all: the provider keeps it" }
paid_at = "internal"

[tables."consent.records"]
owner = "privacy team"
source = "lethe consent set/withdraw; seeded from the sign-up form's answers"
[tables."consent.records".columns]
learner_id = { classification = "internal", identifies = "learner" }
purpose = "internal"
state = "internal"
changed_at = "internal"
source = "internal"
recorded_at = "internal"

[tables."analytics.learner_activity"]
owner = "analytics team"
[tables."analytics.learner_activity".columns]
learner_id = { classification = "internal", identifies = "learner" }
events = "internal"
courses = "internal"
first_seen = "internal"
last_seen = "internal"

[tables."analytics.course_performance"]
owner = "analytics team"
[tables."analytics.course_performance".columns]
course_id = "public"
title = "public"
learners = "internal"
enrollments = "internal"
avg_rating = "internal"
reviews = "internal"
"#;

/// `governance/retention.toml`.
pub const RETENTION: &str = r#"# Retention rules, applied against a day the scheduler passes in, never the clock.
# The periods are the platform's own choices, reviewed with the legal team: not legal advice.

[tables."support.tickets"]
keep_days = 730
# Tickets record when they were opened, not when they were closed: until the support team adds
# a closed_at column, this rule errs early (a ticket opened 25 months ago and closed last week
# goes at once).
counted_from = "opened_at"
only_when = { column = "status", equals = "closed" }

[tables."learning.events"]
keep_days = 365
counted_from = "occurred_at"

[tables."billing.payments"]
keep_days = 3650                  # a placeholder for the period the legal team sets for payment records
counted_from = "paid_at"

[erasure.exceptions."billing.payments"]
reason = "PLACEHOLDER: a legal obligation to keep payment records, such as tax records. The legal team replaces this with the obligation and the law it comes from."
decided_by = "legal team"         # a role, never a person's name
erase_columns = ["card_number"]   # what the obligation doesn't need; an empty list keeps the whole row

[snapshots]
# Written into every table as history.expire.* by `lethe properties generate`.
max_snapshot_age_hours = 120      # 5 days
min_snapshots_to_keep = 1

[statistics]
# Metrics mode for personal, sensitive and unclassified columns: their bounds would be values
# of a person in every manifest. `counts` keeps counts for the planner and no values.
protected = "none"

[sweep]
# Unreferenced files younger than this are never removed: a write in progress keeps its files
# (Iceberg Java's default for orphan removal is 3 days).
min_file_age_hours = 72
"#;

/// `governance/subjects.toml`.
pub const SUBJECTS: &str = r#"# The people an erasure request can name.

[learner]
# Root identifier: every table with a column holding it (by name, or classified as identifying a
# learner in metadata.toml) is part of every erasure.
identifiers = ["crm.learners.learner_id"]
# Further identifiers, resolved through the root table before anything is deleted.
mapped = [{ column = "email", via = "crm.learners" }]
# Identifying values the proof scan searches for (columns of the root table).
values = ["email", "phone", "full_name", "street_address"]
# When a learner's first record was made: lineage edges that ended before it don't apply to them.
first_seen = "signed_up_at"

[learner.drill]
# IDs no learner will ever have, reserved for the weekly erasure drill's synthetic learner.
from = 990000000
to = 990000999
step_budget_seconds = 120

[learner.no_action]
"learning.courses" = "the course catalogue: titles and prices, no learner data"
"crm.instructors" = "instructors are staff, a different subject"

# Personal columns of the tables an erasure changes that are not traces the proof searches for
# (the attestation is not COMPLETE while one is neither a trace nor listed here).
[learner.not_identifying]
"crm.learners.city" = "a city is shared by many learners"
"crm.learners.date_of_birth" = "a date of birth is shared by many learners"
"crm.learners.notes" = "the CRM's notes about the learner go with the learner's row; mentions of the learner elsewhere are found by their email"
"learning.events.ip_address" = "an address is shared by a household or a network; the learner's events go with their rows"
"learning.events.user_agent" = "a browser's user agent is shared by many learners"
"learning.reviews.text" = "the learner's reviews go with their rows; mentions elsewhere are found by the learner's values"
"support.tickets.subject" = "the learner's tickets go with their rows"
"support.tickets.body" = "the learner's tickets go with their rows; another learner's ticket naming them is a mention"
"billing.payments.amount" = "an amount doesn't single a learner out"
"#;

/// The demo's pipelines: (file name, text).
pub const PIPELINES: &[(&str, &str)] = &[
    (
        "learner_activity.sql",
        "-- lethe:target analytics.learner_activity\n\
         -- What each learner did: one row per learner, built nightly.\n\
         SELECT l.learner_id, count(ev.event_id) AS events, count(DISTINCT ev.course_id) AS courses,\n       min(ev.occurred_at) AS first_seen, max(ev.occurred_at) AS last_seen\n\
         FROM crm.learners l LEFT JOIN learning.events ev ON ev.learner_id = l.learner_id\n\
         GROUP BY l.learner_id\n",
    ),
    (
        "course_performance.sql",
        "-- lethe:target analytics.course_performance\n\
         -- Aggregates per course only.\n\
         SELECT c.course_id, c.title, count(DISTINCT e.learner_id) AS learners, count(e.enrollment_id) AS enrollments,\n       avg(r.rating) AS avg_rating, count(r.review_id) AS reviews\n\
         FROM learning.courses c\n\
         LEFT JOIN learning.enrollments e ON e.course_id = c.course_id\n\
         LEFT JOIN learning.reviews r ON r.course_id = c.course_id AND r.learner_id = e.learner_id\n\
         GROUP BY c.course_id, c.title\n",
    ),
    (
        "marketing_audience.sql",
        "-- lethe:target marketing.audience\n\
         -- lethe:consent marketing\n\
         -- Learners marketing may email: consent given and account active.\n\
         SELECT l.learner_id, l.full_name, l.email, count(e.course_id) AS courses_enrolled, max(e.enrolled_at) AS last_enrolled_at\n\
         FROM crm.learners l JOIN learning.enrollments e ON e.learner_id = l.learner_id\n\
         WHERE l.marketing_consent = true AND l.status = 'active'\n\
         GROUP BY l.learner_id, l.full_name, l.email\n",
    ),
    (
        "review_corpus.sql",
        "-- lethe:target ai.review_corpus\n\
         -- lethe:consent ai_training\n\
         -- Reviews whose authors agreed to AI training, for the course assistant.\n\
         SELECT r.review_id, r.text FROM learning.reviews r JOIN crm.learners l ON l.learner_id = r.learner_id\n\
         WHERE l.ai_training_consent = true\n",
    ),
];

/// `governance/stores.toml`: every place outside the warehouse that holds a learner. `{APP_DB}`
/// is replaced by the application database's engine settings and `{VENDOR}` by the vendor
/// API's base URL (a free port chosen at `demo init`).
pub const STORES: &str = r#"# Every place outside the warehouse that holds a learner, and how lethe deletes and probes it.
# Reviewed by the data-protection team with each store's owner. An erasure runs sources first:
# the application database before the warehouse tables loaded from it, the search index and
# the evaluation set after the tables they are built from.

# Warehouse tables loaded from the application database every night (`lethe demo reload`).
[warehouse."crm.learners"]
depends_on = ["app_db"]
[warehouse."support.tickets"]
depends_on = ["app_db"]
[warehouse."billing.payments"]
depends_on = ["app_db"]

[stores.app_db]
kind = "database"
owner = "platform team"
description = "the learning platform's application database: the source of truth"
retention = "none"
{APP_DB}subject_field = "learner_id"
[[stores.app_db.tables]]
table = "learners"
[[stores.app_db.tables]]
table = "tickets"
[[stores.app_db.tables]]
table = "payments"
action = "tombstone"                 # payment records are kept (tax law): the learner is unlinked
erase_columns = ["card_number"]

[stores.crm_export]
kind = "files"
owner = "crm team"
description = "the CRM's export for the marketing agency"
depends_on = ["app_db"]
path = "exports"
subject_field = "learner_id"

[stores.helpdesk]
kind = "http"
owner = "support team"
description = "the helpdesk vendor, which knows learners who contacted support by email"
depends_on = ["app_db"]
identifier = "email"
delete_request = { method = "DELETE", url = "{VENDOR}/v1/users/{subject}" }
probe_request = { method = "GET", url = "{VENDOR}/v1/users/{subject}" }
seed_request = { method = "PUT", url = "{VENDOR}/v1/users/{subject}" }   # a test user, for lethe drill
timeout_seconds = 5
retries = 3
backoff_ms = 100

[stores.support_search]
kind = "index"
owner = "support team"
description = "full-text search over support tickets for the support agents"
engine = "sqlite"
path = "search/support.db"
table = "tickets_fts"
builds_table = "index_builds"
subject_field = "learner_id"
rebuilt_from = "support.tickets"
schedule = "nightly at 02:00 (lethe demo rebuild-index)"

[stores.eval_set]
kind = "git"
owner = "ml team"
description = "the course assistant's evaluation set, cases drawn from support tickets"
depends_on = ["support.tickets"]
path = "evalset"
files = ["cases/*.jsonl"]
subject_field = "learner_id"
"#;

/// `governance/destinations.txt`: the platform's data destinations (its egress allowlist), for
/// `lethe stores check --destinations`.
pub const DESTINATIONS: &str = r#"# Where the platform's data goes: every destination must be a registered store.
file:exports
git:evalset
sqlite:search/support.db
{APP_DB_DESTINATION}
{VENDOR}
"#;

/// `governance/policy.toml`: who may read what through `lethe query --as`, and where consent
/// lives.
pub const POLICY: &str = r#"# Who may read what through `lethe query --as PRINCIPAL`. Reviewed by the data-protection team.
# Anything not granted here is refused; every decision goes to state/audit.jsonl.

[consent]
# Consent states with their history (lethe consent set/withdraw). The booleans below are derived
# from the current state and kept in step by lethe (given = true, unknown = null).
table = "consent.records"
subject = "learner"
[consent.purposes]
marketing = "crm.learners.marketing_consent"
ai_training = "crm.learners.ai_training_consent"

[principals]
"marketing-1" = { role = "marketing" }
analyst_gb = { role = "analysts", attributes = { country = "GB" } }
dpo = { role = "privacy" }

[roles.marketing]
# The people marketing may contact: consent given and account active.
tables = ["crm.learners"]
[roles.marketing.masks]
identifier = "clear"
personal = "null"
sensitive = "null"
internal = "clear"
public = "clear"
[roles.marketing.columns."crm.learners"]
full_name = "clear"
email = "clear"
[roles.marketing.row_filters]
"crm.learners" = "marketing_consent = true AND status = 'active'"

[roles.analysts]
# Everything but consent records, with learners behind keyed pseudonyms (the same in every
# table, so joins work). Tables with unclassified columns stay closed.
tables = ["crm.*", "learning.*", "support.*", "billing.*", "analytics.*", "marketing.*", "ai.*"]
[roles.analysts.masks]
identifier = "pseudonym"
personal = "null"
sensitive = "null"
internal = "clear"
public = "clear"
[roles.analysts.columns."crm.learners"]
email = "pseudonym"          # count distinct people across systems without seeing addresses
date_of_birth = "year"
city = { prefix = 3 }        # generalised, as a postcode's first characters would be

[roles.privacy]
# The data-protection officer: every table, clear, unclassified columns included, and the rows
# of learners under a restriction (everyone else's queries leave them out).
tables = ["*"]
unclassified = "allow"
restricted = "show"
[roles.privacy.masks]
identifier = "clear"
personal = "clear"
sensitive = "clear"
internal = "clear"
public = "clear"
"#;
