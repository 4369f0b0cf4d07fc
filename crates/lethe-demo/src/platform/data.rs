//! The demo platform's source data: an online learning platform, deterministic for a seed.
//!
//! Scale 1 has 5,000 learners, 100,000 learning events, 2,000 support tickets and about 17,500
//! payments; dates run from 2024-01-01 to 2026-10-01 (the demo's "today"). Some values are
//! shaped on purpose: learner 3590's email is typed in capitals (so it sorts before every other
//! email and becomes a manifest's lower bound), learner 3590 has 2 enrollments, 19 events, one
//! review, one ticket (the most recent: the search index and the evaluation set hold it too) and
//! 2 payments, some learners' consent to AI training is unknown (they
//! signed up before the platform asked), and ticket and review texts sometimes name another
//! learner.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, Int32Array, Int64Array, RecordBatch,
    StringArray, TimestampMicrosecondArray,
};
use chrono::{Datelike, Duration, NaiveDate, NaiveDateTime};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The demo's "today": retention is applied for this day.
pub const TODAY: &str = "2026-10-01";
/// The learner the README's walkthrough withdraws and erases.
pub const DEMO_LEARNER: i64 = 3590;

const FIRST: &[&str] = &[
    "Alexa", "Jacob", "Maria", "Liam", "Noor", "Oliver", "Aisha", "Mateo", "Sofia", "Ethan",
    "Chloe", "Lucas", "Amara", "Hugo", "Ines", "Kenji", "Lena", "Omar", "Priya", "Rafael", "Sara",
    "Tomas", "Yara", "Zofia", "Ben", "Clara", "Dmitri", "Elif", "Farah", "Gustav", "Hana", "Ivan",
    "Julia", "Karim", "Lucia", "Marek", "Nina", "Oscar", "Paula", "Quentin", "Rosa", "Stefan",
    "Tariq", "Ursula", "Viktor", "Wanda", "Xavier", "Yusuf", "Zainab", "Anton", "Bianca", "Cyrus",
    "Daria", "Emil", "Fatima", "Gabriel", "Helga", "Idris", "Jonas", "Kira",
];
const LAST: &[&str] = &[
    "Reed",
    "Haase",
    "Novak",
    "Okafor",
    "Silva",
    "Tanaka",
    "Weber",
    "Khan",
    "Rossi",
    "Dubois",
    "Jensen",
    "Costa",
    "Moreau",
    "Fischer",
    "Kowalski",
    "Larsen",
    "Mendes",
    "Nilsen",
    "Ortiz",
    "Petrov",
    "Quinn",
    "Ramos",
    "Schmidt",
    "Thorne",
    "Ueda",
    "Varga",
    "Walsh",
    "Yilmaz",
    "Zimmer",
    "Brandt",
    "Adler",
    "Bauer",
    "Carvalho",
    "Dalton",
    "Eriksen",
    "Ferrari",
    "Gomez",
    "Horvat",
    "Ibrahim",
    "Janssen",
    "Keller",
    "Lindqvist",
    "Marsh",
    "Nakamura",
    "Olsen",
    "Pereira",
    "Quist",
    "Rahman",
    "Sato",
    "Teller",
];

/// A name unique to learner `id` while there are fewer learners than combinations (78,000):
/// people sharing a name would make every proof scan for one of them find the others.
fn unique_name(id: i64, shift: u64) -> (&'static str, char, &'static str) {
    let combos = (FIRST.len() * LAST.len() * 26) as u64;
    // 7,919 is a unit modulo 78,000, so distinct ids give distinct combinations.
    let k = ((id as u64 - 1) * 7_919 + shift) % combos;
    let first = FIRST[(k % FIRST.len() as u64) as usize];
    let rest = k / FIRST.len() as u64;
    let last = LAST[(rest % LAST.len() as u64) as usize];
    let initial = (b'A' + (rest / LAST.len() as u64 % 26) as u8) as char;
    (first, initial, last)
}
const DOMAINS: &[&str] = &[
    "post.example",
    "mail.example",
    "example.net",
    "inbox.example.org",
    "web.example",
];
const STREETS: &[&str] = &[
    "Radial", "Street", "Lane", "Avenue", "Road", "Close", "Way", "Terrace", "Court", "Drive",
];
const CITIES: &[&str] = &[
    "London",
    "Leeds",
    "Bristol",
    "Manchester",
    "Glasgow",
    "Cardiff",
    "Belfast",
    "York",
    "Brighton",
    "Oxford",
];
const CATEGORIES: &[&str] = &[
    "data",
    "design",
    "management",
    "languages",
    "finance",
    "health",
];
const TOPICS: &[&str] = &[
    "SQL",
    "Python",
    "Negotiation",
    "Spanish",
    "Bookkeeping",
    "UX Research",
    "Statistics",
    "Leadership",
    "Nutrition",
    "Excel",
    "Photography",
    "Rust",
];
const KINDS: &[&str] = &[
    "view",
    "play",
    "pause",
    "quiz_submit",
    "lesson_complete",
    "download",
];
const AGENTS: &[&str] = &[
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Firefox/128.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) Safari/605.1.15",
    "Mozilla/5.0 (Linux; Android 14) Chrome/126.0 Mobile",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5) Mobile/15E148",
];
const TICKET_SUBJECTS: &[&str] = &[
    "Can't log in",
    "Refund request",
    "Video won't play",
    "Invoice address",
    "Certificate missing",
    "Change of email",
];
const NOTES: &[&str] = &[
    "",
    "",
    "",
    "prefers evening sessions",
    "asked for invoices by post",
    "called about a refund",
    "company pays for courses",
    "hearing impaired: captions on",
];

/// Column vectors of one demo table, in its column order.
type LearnerColumns = (
    Vec<i64>,
    Vec<String>,
    Vec<String>,
    Vec<String>,
    Vec<String>,
    Vec<String>,
    Vec<i32>,
    Vec<Option<String>>,
    Vec<String>,
    Vec<bool>,
    Vec<Option<bool>>,
    Vec<i64>,
);

/// Column vectors of one demo table, in its column order.
type InstructorColumns = (
    Vec<i64>,
    Vec<String>,
    Vec<String>,
    Vec<String>,
    Vec<Option<i64>>,
);

/// Column vectors of one demo table, in its column order.
type CourseColumns = (
    Vec<i64>,
    Vec<i64>,
    Vec<String>,
    Vec<String>,
    Vec<i128>,
    Vec<Option<i64>>,
);

/// Column vectors of one demo table, in its column order.
type EnrollmentColumns = (
    Vec<i64>,
    Vec<i64>,
    Vec<i64>,
    Vec<Option<i64>>,
    Vec<Option<i64>>,
);

/// Column vectors of one demo table, in its column order.
type ReviewColumns = (
    Vec<i64>,
    Vec<i64>,
    Vec<i64>,
    Vec<i32>,
    Vec<String>,
    Vec<Option<i64>>,
);

/// One batch per append, for one table.
#[derive(Debug, Clone)]
pub struct TableData {
    /// The table's dotted name.
    pub table: &'static str,
    /// The batches, one per append (one snapshot each).
    pub appends: Vec<RecordBatch>,
    /// The table's sort order (columns, ascending), declared when the table is created.
    pub sorted_by: &'static [&'static str],
}

/// A generated learner (kept to derive the other tables).
#[derive(Debug, Clone)]
struct Learner {
    id: i64,
    full_name: String,
    email: String,
    signed_up: NaiveDateTime,
}

fn start() -> NaiveDateTime {
    NaiveDate::from_ymd_opt(2024, 1, 1)
        .expect("date")
        .and_hms_opt(0, 0, 0)
        .expect("time")
}

fn end() -> NaiveDateTime {
    NaiveDate::from_ymd_opt(2026, 10, 1)
        .expect("date")
        .and_hms_opt(0, 0, 0)
        .expect("time")
}

fn between(rng: &mut ChaCha8Rng, a: NaiveDateTime, b: NaiveDateTime) -> NaiveDateTime {
    let span = (b - a).num_seconds().max(1);
    a + Duration::seconds(rng.random_range(0..span))
}

fn micros(t: NaiveDateTime) -> i64 {
    t.and_utc().timestamp_micros()
}

fn days(d: NaiveDate) -> i32 {
    (d - NaiveDate::from_ymd_opt(1970, 1, 1).expect("epoch")).num_days() as i32
}

fn pick<'a>(rng: &mut ChaCha8Rng, v: &[&'a str]) -> &'a str {
    v[rng.random_range(0..v.len())]
}

/// A phone number unique to `id` (for id < 10,000,000), written in one of four styles.
fn phone(rng: &mut ChaCha8Rng, id: i64) -> String {
    // 2,654,435,761 is a unit modulo 10^7, so distinct ids give distinct digits.
    let n = (id as u64 * 2_654_435_761) % 10_000_000;
    let (b, c) = (n / 10_000, n % 10_000);
    match rng.random_range(0..4) {
        0 => format!("+44 20 7{b:03} {c:04}"),
        1 => format!("(555) {b:03}-{c:04}"),
        2 => format!("555.{b:03}.{c:04}"),
        _ => format!("+1-555-{b:03}-{c:04} x{}", rng.random_range(1..99)),
    }
}

fn card(rng: &mut ChaCha8Rng) -> String {
    let mut digits: Vec<u32> = vec![4];
    for _ in 0..14 {
        digits.push(rng.random_range(0..10));
    }
    // Luhn check digit, so discovery's card detector recognises them.
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, d)| {
            if i % 2 == 0 {
                let x = d * 2;
                if x > 9 { x - 9 } else { x }
            } else {
                *d
            }
        })
        .sum();
    digits.push((10 - sum % 10) % 10);
    let s: String = digits
        .iter()
        .map(|d| char::from_digit(*d, 10).expect("digit"))
        .collect();
    format!("{} {} {} {}", &s[0..4], &s[4..8], &s[8..12], &s[12..16])
}

fn ts_array(v: Vec<Option<i64>>) -> ArrayRef {
    Arc::new(TimestampMicrosecondArray::from(v))
}

fn strs(v: Vec<String>) -> ArrayRef {
    Arc::new(StringArray::from(v))
}

fn opt_strs(v: Vec<Option<String>>) -> ArrayRef {
    Arc::new(StringArray::from(v))
}

fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter(cols).expect("demo batch")
}

/// Every table the demo builds: the eight sources, the consent records and the four tables
/// its pipelines build.
pub const TABLES: &[&str] = &[
    "crm.learners",
    "crm.instructors",
    "learning.courses",
    "learning.enrollments",
    "learning.events",
    "learning.reviews",
    "support.tickets",
    "billing.payments",
    "consent.records",
    "analytics.learner_activity",
    "analytics.course_performance",
    "marketing.audience",
    "ai.review_corpus",
];

/// Generates every source table for `scale` and `seed`.
pub fn generate(scale: u32, seed: u64) -> Vec<TableData> {
    let scale = scale.max(1) as i64;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n_learners = 5_000 * scale;
    let mut learners: Vec<Learner> = Vec::with_capacity(n_learners as usize);
    let mut cols: LearnerColumns = Default::default();
    let asked_from = NaiveDate::from_ymd_opt(2025, 3, 1)
        .expect("date")
        .and_hms_opt(0, 0, 0)
        .expect("time");
    let shift = rng.random_range(0..1_000_000u64);
    for id in 1..=n_learners {
        let (first, initial, last) = unique_name(id, shift);
        let full_name = format!("{first} {initial}. {last}");
        let domain = pick(&mut rng, DOMAINS);
        // Emails carry the id, so they are unique too.
        let mut email = if rng.random_bool(0.5) {
            format!("{}{id}@{domain}", first.to_lowercase())
        } else {
            format!(
                "{}.{}{id}@{domain}",
                first.to_lowercase(),
                last.to_lowercase()
            )
        };
        if id == DEMO_LEARNER {
            // Typed in capitals: sorts before every other email.
            email = email.to_uppercase();
        }
        let signed_up = between(&mut rng, start(), end() - Duration::days(20));
        let dob = NaiveDate::from_ymd_opt(
            rng.random_range(1950..2006),
            rng.random_range(1..13),
            rng.random_range(1..29),
        )
        .expect("dob");
        let status = if id == DEMO_LEARNER {
            "active"
        } else {
            match rng.random_range(0..20) {
                0 => "suspended",
                1..=3 => "inactive",
                _ => "active",
            }
        };
        let marketing = id == DEMO_LEARNER || rng.random_bool(0.45);
        let ai = if signed_up < asked_from {
            None
        } else {
            Some(rng.random_bool(0.5))
        };
        let note = pick(&mut rng, NOTES);
        cols.0.push(id);
        cols.1.push(full_name.clone());
        cols.2.push(email.clone());
        cols.3.push(phone(&mut rng, id));
        // House numbers carry the id: addresses are unique.
        cols.4.push(format!(
            "{} {} {}",
            100 + id,
            pick(&mut rng, FIRST),
            pick(&mut rng, STREETS)
        ));
        cols.5.push(pick(&mut rng, CITIES).to_string());
        cols.6.push(days(dob));
        cols.7.push(if note.is_empty() {
            None
        } else {
            Some(note.to_string())
        });
        cols.8.push(status.to_string());
        cols.9.push(marketing);
        cols.10.push(ai);
        cols.11.push(micros(signed_up));
        learners.push(Learner {
            id,
            full_name,
            email,
            signed_up,
        });
    }
    // crm.learners: appended once per sign-up year (three snapshots, three files).
    let mut learner_appends = Vec::new();
    for year in [2024, 2025, 2026] {
        let idx: Vec<usize> = (0..learners.len())
            .filter(|i| learners[*i].signed_up.year() == year)
            .collect();
        let take_i64 = |v: &Vec<i64>| idx.iter().map(|i| v[*i]).collect::<Vec<_>>();
        let take_s = |v: &Vec<String>| idx.iter().map(|i| v[*i].clone()).collect::<Vec<_>>();
        learner_appends.push(batch(vec![
            (
                "learner_id",
                Arc::new(Int64Array::from(take_i64(&cols.0))) as ArrayRef,
            ),
            ("full_name", strs(take_s(&cols.1))),
            ("email", strs(take_s(&cols.2))),
            ("phone", strs(take_s(&cols.3))),
            ("street_address", strs(take_s(&cols.4))),
            ("city", strs(take_s(&cols.5))),
            (
                "date_of_birth",
                Arc::new(Date32Array::from(
                    idx.iter().map(|i| cols.6[*i]).collect::<Vec<_>>(),
                )),
            ),
            (
                "notes",
                opt_strs(idx.iter().map(|i| cols.7[*i].clone()).collect()),
            ),
            ("status", strs(take_s(&cols.8))),
            (
                "marketing_consent",
                Arc::new(BooleanArray::from(
                    idx.iter().map(|i| cols.9[*i]).collect::<Vec<_>>(),
                )),
            ),
            (
                "ai_training_consent",
                Arc::new(BooleanArray::from(
                    idx.iter().map(|i| cols.10[*i]).collect::<Vec<_>>(),
                )),
            ),
            (
                "signed_up_at",
                ts_array(idx.iter().map(|i| Some(cols.11[*i])).collect()),
            ),
        ]));
    }

    // crm.instructors and learning.courses.
    let n_instructors = 40 * scale;
    let mut ins: InstructorColumns = Default::default();
    for id in 1..=n_instructors {
        let first = pick(&mut rng, FIRST);
        let last = pick(&mut rng, LAST);
        ins.0.push(id);
        ins.1.push(format!("{first} {last}"));
        ins.2.push(format!(
            "{}.{}@teach.example",
            first.to_lowercase(),
            last.to_lowercase()
        ));
        ins.3.push(format!(
            "Teaches {} since {}",
            pick(&mut rng, TOPICS),
            rng.random_range(2005..2023)
        ));
        ins.4.push(Some(micros(between(
            &mut rng,
            start() - Duration::days(700),
            start(),
        ))));
    }
    let instructors = batch(vec![
        (
            "instructor_id",
            Arc::new(Int64Array::from(ins.0)) as ArrayRef,
        ),
        ("full_name", strs(ins.1)),
        ("email", strs(ins.2)),
        ("bio", strs(ins.3)),
        ("joined_at", ts_array(ins.4)),
    ]);
    let n_courses = 120 * scale;
    let mut cs: CourseColumns = Default::default();
    for id in 1..=n_courses {
        cs.0.push(id);
        cs.1.push(rng.random_range(1..=n_instructors));
        cs.2.push(format!(
            "{} {}",
            pick(
                &mut rng,
                &[
                    "Intro to",
                    "Advanced",
                    "Practical",
                    "Applied",
                    "Fundamentals of"
                ]
            ),
            pick(&mut rng, TOPICS)
        ));
        cs.3.push(pick(&mut rng, CATEGORIES).to_string());
        cs.4.push(rng.random_range(19..400) as i128 * 100 + 99);
        cs.5.push(Some(micros(between(
            &mut rng,
            start() - Duration::days(300),
            end() - Duration::days(200),
        ))));
    }
    let courses = batch(vec![
        ("course_id", Arc::new(Int64Array::from(cs.0)) as ArrayRef),
        ("instructor_id", Arc::new(Int64Array::from(cs.1))),
        ("title", strs(cs.2)),
        ("category", strs(cs.3)),
        (
            "price",
            Arc::new(
                Decimal128Array::from(cs.4)
                    .with_precision_and_scale(10, 2)
                    .expect("decimal"),
            ),
        ),
        ("published_at", ts_array(cs.5)),
    ]);

    // learning.enrollments.
    let mut en: EnrollmentColumns = Default::default();
    let mut enrolled: Vec<(i64, i64, NaiveDateTime)> = Vec::new();
    for l in &learners {
        let n = if l.id == DEMO_LEARNER {
            2
        } else {
            rng.random_range(0..6)
        };
        for _ in 0..n {
            let course = rng.random_range(1..=n_courses);
            let at = between(&mut rng, l.signed_up, end());
            let done = if rng.random_bool(0.4) {
                Some(micros(between(&mut rng, at, end())))
            } else {
                None
            };
            en.0.push(en.0.len() as i64 + 1);
            en.1.push(l.id);
            en.2.push(course);
            en.3.push(Some(micros(at)));
            en.4.push(done);
            enrolled.push((l.id, course, at));
        }
    }
    let enrollments = batch(vec![
        (
            "enrollment_id",
            Arc::new(Int64Array::from(en.0)) as ArrayRef,
        ),
        ("learner_id", Arc::new(Int64Array::from(en.1))),
        ("course_id", Arc::new(Int64Array::from(en.2))),
        ("enrolled_at", ts_array(en.3)),
        ("completed_at", ts_array(en.4)),
    ]);

    // learning.events: 100,000 per scale unit. The platform appends events daily and compacts
    // the table every week sorted by its sort order (learner_id, occurred_at), then expires
    // the snapshots from before: one compacted append for everything before the last week,
    // then the last week's daily appends (the writer sorts each by the table's sort order).
    let n_events = 100_000 * scale;
    let demo_enrolled: Vec<&(i64, i64, NaiveDateTime)> =
        enrolled.iter().filter(|e| e.0 == DEMO_LEARNER).collect();
    let others: Vec<&(i64, i64, NaiveDateTime)> =
        enrolled.iter().filter(|e| e.0 != DEMO_LEARNER).collect();
    let mut events: Vec<(i64, i64, NaiveDateTime)> = Vec::with_capacity(n_events as usize);
    for i in 0..n_events {
        let e = if i < 19 && !demo_enrolled.is_empty() {
            demo_enrolled[i as usize % demo_enrolled.len()]
        } else {
            others[rng.random_range(0..others.len())]
        };
        events.push((e.0, e.1, between(&mut rng, e.2, end())));
    }
    events.sort_by_key(|e| e.2);
    let compacted_until = NaiveDate::from_ymd_opt(2026, 9, 24)
        .expect("date")
        .and_hms_opt(0, 0, 0)
        .expect("time");
    let mut event_appends = Vec::new();
    let mut month_start = start();
    let mut next_id = 1i64;
    let mut pos = 0usize;
    while month_start < end() {
        let next = if month_start < compacted_until {
            compacted_until
        } else {
            month_start + Duration::days(1)
        };
        let from = pos;
        while pos < events.len() && events[pos].2 < next {
            pos += 1;
        }
        let slice = &events[from..pos];
        if !slice.is_empty() {
            let ids: Vec<i64> = (next_id..next_id + slice.len() as i64).collect();
            next_id += slice.len() as i64;
            let ips: Vec<String> = slice
                .iter()
                .map(|_| {
                    if rng.random_bool(0.85) {
                        format!(
                            "{}.{}.{}.{}",
                            rng.random_range(1..224),
                            rng.random_range(0..256),
                            rng.random_range(0..256),
                            rng.random_range(1..255)
                        )
                    } else {
                        format!(
                            "2001:db8:{:x}::{:x}",
                            rng.random_range(0..0xffff),
                            rng.random_range(1..0xffff)
                        )
                    }
                })
                .collect();
            event_appends.push(batch(vec![
                ("event_id", Arc::new(Int64Array::from(ids)) as ArrayRef),
                (
                    "learner_id",
                    Arc::new(Int64Array::from(
                        slice.iter().map(|e| e.0).collect::<Vec<_>>(),
                    )),
                ),
                (
                    "course_id",
                    Arc::new(Int64Array::from(
                        slice.iter().map(|e| e.1).collect::<Vec<_>>(),
                    )),
                ),
                (
                    "kind",
                    strs(
                        slice
                            .iter()
                            .map(|_| pick(&mut rng, KINDS).to_string())
                            .collect(),
                    ),
                ),
                ("ip_address", strs(ips)),
                (
                    "user_agent",
                    strs(
                        slice
                            .iter()
                            .map(|_| pick(&mut rng, AGENTS).to_string())
                            .collect(),
                    ),
                ),
                (
                    "occurred_at",
                    ts_array(slice.iter().map(|e| Some(micros(e.2))).collect()),
                ),
            ]));
        }
        month_start = next;
    }

    // learning.reviews: about one per three learners who enrolled; texts sometimes name
    // another learner.
    let mut rv: ReviewColumns = Default::default();
    let mut seen_demo = false;
    for (lid, course, at) in &enrolled {
        let write = if *lid == DEMO_LEARNER {
            !seen_demo
        } else {
            rng.random_bool(0.13)
        };
        if !write {
            continue;
        }
        if *lid == DEMO_LEARNER {
            seen_demo = true;
        }
        let other = &learners[rng.random_range(0..learners.len())];
        let text = match rng.random_range(0..6) {
            0 if other.id != *lid && other.id != DEMO_LEARNER => format!(
                "Took it with {}, we both loved the exercises.",
                other.full_name
            ),
            1 => "Clear explanations, but the quizzes were too easy.".to_string(),
            2 => "Too fast for a beginner. The second half needs more examples.".to_string(),
            3 => "Exactly what I needed for my new job.".to_string(),
            4 => "Audio was poor in lesson 3, otherwise great.".to_string(),
            _ => "Worth the price.".to_string(),
        };
        rv.0.push(rv.0.len() as i64 + 1);
        rv.1.push(*lid);
        rv.2.push(*course);
        rv.3.push(rng.random_range(1..6));
        rv.4.push(text);
        rv.5.push(Some(micros(between(&mut rng, *at, end()))));
    }
    let half = rv.0.len() / 2;
    let review_batch = batch(vec![
        ("review_id", Arc::new(Int64Array::from(rv.0)) as ArrayRef),
        ("learner_id", Arc::new(Int64Array::from(rv.1))),
        ("course_id", Arc::new(Int64Array::from(rv.2))),
        ("rating", Arc::new(Int32Array::from(rv.3))),
        ("text", strs(rv.4)),
        ("written_at", ts_array(rv.5)),
    ]);
    let reviews = vec![
        review_batch.slice(0, half),
        review_batch.slice(half, review_batch.num_rows() - half),
    ];

    // support.tickets: 2,000 per scale unit; learner 3590 has one, the most recent.
    let n_tickets = 2_000 * scale;
    let mut tk: Vec<(i64, NaiveDateTime, String, String, String)> = Vec::new();
    for _ in 0..n_tickets {
        let l = loop {
            let l = &learners[rng.random_range(0..learners.len())];
            if l.id != DEMO_LEARNER {
                break l;
            }
        };
        let opened = between(&mut rng, l.signed_up, end());
        let age_days = (end() - opened).num_days();
        let closed = age_days > 30 && rng.random_bool(0.9) || rng.random_bool(0.3);
        let other = &learners[rng.random_range(0..learners.len())];
        let subject = pick(&mut rng, TICKET_SUBJECTS).to_string();
        let body = match rng.random_range(0..8) {
            0 if other.id != l.id && other.id != DEMO_LEARNER => format!(
                "My colleague {} has the same problem, please check their account too.",
                other.full_name
            ),
            1 if other.id != l.id && other.id != DEMO_LEARNER => {
                format!("Please send the invoice to {} instead of me.", other.email)
            }
            2 => "I have tried two browsers and cleared the cache.".to_string(),
            3 => "The payment went through twice, I'd like one refunded.".to_string(),
            _ => "Please help, this is blocking my course.".to_string(),
        };
        tk.push((
            l.id,
            opened,
            if closed {
                "closed".into()
            } else {
                "open".into()
            },
            subject,
            body,
        ));
    }
    tk.sort_by_key(|t| t.1);
    if let Some(last) = tk.last_mut() {
        last.0 = DEMO_LEARNER;
        last.2 = "open".into();
        last.3 = "Certificate missing".into();
        last.4 = "My certificate for Advanced SQL is missing.".into();
    }
    let mut ticket_appends = Vec::new();
    let mut next_ticket = 1i64;
    for year in [2024, 2025, 2026] {
        let part: Vec<&(i64, NaiveDateTime, String, String, String)> =
            tk.iter().filter(|t| t.1.year() == year).collect();
        if part.is_empty() {
            continue;
        }
        let ids: Vec<i64> = (next_ticket..next_ticket + part.len() as i64).collect();
        next_ticket += part.len() as i64;
        ticket_appends.push(batch(vec![
            ("ticket_id", Arc::new(Int64Array::from(ids)) as ArrayRef),
            (
                "learner_id",
                Arc::new(Int64Array::from(
                    part.iter().map(|t| t.0).collect::<Vec<_>>(),
                )),
            ),
            (
                "opened_at",
                ts_array(part.iter().map(|t| Some(micros(t.1))).collect()),
            ),
            ("status", strs(part.iter().map(|t| t.2.clone()).collect())),
            ("subject", strs(part.iter().map(|t| t.3.clone()).collect())),
            ("body", strs(part.iter().map(|t| t.4.clone()).collect())),
        ]));
    }

    // billing.payments: about 3.5 per learner; learner 3590 has 2.
    let mut py: Vec<(i64, i128, String, String, NaiveDateTime)> = Vec::new();
    for l in &learners {
        let n = if l.id == DEMO_LEARNER {
            2
        } else {
            rng.random_range(1..7)
        };
        let c = card(&mut rng);
        for _ in 0..n {
            py.push((
                l.id,
                rng.random_range(1900..40000) as i128,
                pick(&mut rng, &["GBP", "GBP", "EUR", "USD"]).to_string(),
                c.clone(),
                between(&mut rng, l.signed_up, end()),
            ));
        }
    }
    py.sort_by_key(|p| p.4);
    let mut payment_appends = Vec::new();
    let mut next_payment = 1i64;
    for year in [2024, 2025, 2026] {
        let part: Vec<&(i64, i128, String, String, NaiveDateTime)> =
            py.iter().filter(|p| p.4.year() == year).collect();
        if part.is_empty() {
            continue;
        }
        let ids: Vec<i64> = (next_payment..next_payment + part.len() as i64).collect();
        next_payment += part.len() as i64;
        payment_appends.push(batch(vec![
            ("payment_id", Arc::new(Int64Array::from(ids)) as ArrayRef),
            (
                "learner_id",
                Arc::new(Int64Array::from(
                    part.iter().map(|p| p.0).collect::<Vec<_>>(),
                )),
            ),
            (
                "amount",
                Arc::new(
                    Decimal128Array::from(part.iter().map(|p| p.1).collect::<Vec<_>>())
                        .with_precision_and_scale(10, 2)
                        .expect("decimal"),
                ),
            ),
            ("currency", strs(part.iter().map(|p| p.2.clone()).collect())),
            (
                "card_number",
                strs(part.iter().map(|p| p.3.clone()).collect()),
            ),
            (
                "paid_at",
                ts_array(part.iter().map(|p| Some(micros(p.4))).collect()),
            ),
        ]));
    }

    vec![
        TableData {
            table: "crm.learners",
            appends: learner_appends,
            sorted_by: &[],
        },
        TableData {
            table: "crm.instructors",
            appends: vec![instructors],
            sorted_by: &[],
        },
        TableData {
            table: "learning.courses",
            appends: vec![courses],
            sorted_by: &[],
        },
        TableData {
            table: "learning.enrollments",
            appends: vec![enrollments],
            sorted_by: &[],
        },
        TableData {
            table: "learning.events",
            appends: event_appends,
            sorted_by: &["learner_id", "occurred_at"],
        },
        TableData {
            table: "learning.reviews",
            appends: reviews,
            sorted_by: &[],
        },
        TableData {
            table: "support.tickets",
            appends: ticket_appends,
            sorted_by: &[],
        },
        TableData {
            table: "billing.payments",
            appends: payment_appends,
            sorted_by: &[],
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(t: &TableData) -> usize {
        t.appends.iter().map(RecordBatch::num_rows).sum()
    }

    #[test]
    fn deterministic_and_shaped_as_documented() {
        let a = generate(1, 7);
        let b = generate(1, 7);
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(
                x.appends, y.appends,
                "{} differs for the same seed",
                x.table
            );
        }
        let by = |n: &str| a.iter().find(|t| t.table == n).unwrap();
        assert_eq!(rows(by("crm.learners")), 5_000);
        assert_eq!(rows(by("learning.events")), 100_000);
        assert_eq!(rows(by("support.tickets")), 2_000);
        let events = by("learning.events");
        assert_eq!(
            events.appends.len(),
            8,
            "the compacted history, then a week of daily appends"
        );
        let daily: Vec<usize> = events.appends[1..].iter().map(|b| b.num_rows()).collect();
        assert!(
            daily.iter().all(|d| *d * 20 < events.appends[0].num_rows()),
            "the compacted history holds most events: {} then {daily:?}",
            events.appends[0].num_rows()
        );
        let p = rows(by("billing.payments"));
        assert!((15_000..20_000).contains(&p), "{p} payments");
        let c = generate(1, 8);
        assert_ne!(a[0].appends, c[0].appends, "another seed gives other data");
    }
}
