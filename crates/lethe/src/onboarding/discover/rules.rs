//! What a column's name and values say it holds: name rules, and value patterns with their
//! checksums (Luhn for card numbers, ISO 7064 mod 97 for IBANs).
//!
//! Name rules read the column name as words (`dateOfBirth`, `date_of_birth` and `DOB` alike).
//! Value patterns are checked on a sample; a kind is found when at least a given share of the
//! non-null sampled values match it. Neither ever returns or logs a value: only kinds, shares
//! and counts.
//!
//! What they don't find: person names by value (a list of names would be needed, and product
//! titles look alike), dates of birth by value (any date looks alike), and personal data in a
//! column whose name and values are both unremarkable. Such columns stay unclassified, which
//! the policy treats as closed.

use serde::Serialize;

use crate::governance::metadata::Classification;

/// A kind of personal (or not) content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// An email address.
    Email,
    /// A phone number.
    Phone,
    /// A person's name.
    PersonName,
    /// A street address.
    Address,
    /// A postcode or ZIP code.
    Postcode,
    /// A date of birth or an age.
    DateOfBirth,
    /// An IP address.
    IpAddress,
    /// A device, cookie, session or advertising identifier, or a user agent.
    OnlineIdentifier,
    /// A login name or handle.
    Username,
    /// Gender or sex.
    Gender,
    /// A precise location.
    Location,
    /// Free text written by or about a person.
    FreeText,
    /// An identifier of a person (a customer, user, learner...).
    PersonIdentifier,
    /// A payment card number.
    CardNumber,
    /// An IBAN.
    Iban,
    /// A bank account or routing number.
    BankAccount,
    /// A government identifier (passport, national insurance, social security, tax number...).
    GovernmentId,
    /// Money amounts and income about a person.
    Financial,
    /// Special-category data (health, religion, ethnicity...).
    SpecialCategory,
    /// A password or secret.
    Credential,
    /// A UUID (an identifier; personal only by what it identifies).
    Uuid,
}

impl Kind {
    /// The classification a column of this kind gets (None: no classification follows).
    pub fn classification(self) -> Option<Classification> {
        use Kind::*;
        match self {
            CardNumber | Iban | BankAccount | GovernmentId | Financial | SpecialCategory
            | Credential => Some(Classification::Sensitive),
            Uuid => None,
            _ => Some(Classification::Personal),
        }
    }

    /// Whether the kind addresses a person directly (recall for these must be 100%).
    pub fn is_direct(self) -> bool {
        use Kind::*;
        matches!(
            self,
            Email
                | Phone
                | PersonName
                | Address
                | IpAddress
                | OnlineIdentifier
                | Username
                | PersonIdentifier
                | CardNumber
                | Iban
                | BankAccount
                | GovernmentId
        )
    }

    /// Words for people.
    pub fn describe(self) -> &'static str {
        use Kind::*;
        match self {
            Email => "email",
            Phone => "phone number",
            PersonName => "person name",
            Address => "street address",
            Postcode => "postcode",
            DateOfBirth => "date of birth",
            IpAddress => "IP address",
            OnlineIdentifier => "online identifier",
            Username => "user name",
            Gender => "gender",
            Location => "location",
            FreeText => "free text",
            PersonIdentifier => "person identifier",
            CardNumber => "card number",
            Iban => "IBAN",
            BankAccount => "bank account",
            GovernmentId => "government ID",
            Financial => "financial",
            SpecialCategory => "special category",
            Credential => "credential",
            Uuid => "UUID",
        }
    }
}

/// The words of a column name, lowercased: `dateOfBirth` and `date_of_birth` give
/// `["date", "of", "birth"]`.
pub fn words(name: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = name.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            continue;
        }
        // camelCase and letter/digit boundaries.
        if let Some(&prev) = (!cur.is_empty())
            .then(|| chars.get(i.wrapping_sub(1)))
            .flatten()
        {
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let split = (prev.is_lowercase() && c.is_uppercase())
                || (prev.is_uppercase() && c.is_uppercase() && next_lower)
                || (prev.is_ascii_digit() != c.is_ascii_digit());
            if split {
                out.push(std::mem::take(&mut cur));
            }
        }
        cur.extend(c.to_lowercase());
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Words naming a person (or their account) when followed by `id`, `name`, `ref`...
pub const PERSON_WORDS: &[&str] = &[
    "user",
    "customer",
    "client",
    "member",
    "person",
    "people",
    "patient",
    "employee",
    "subscriber",
    "learner",
    "student",
    "contact",
    "account",
    "buyer",
    "seller",
    "owner",
    "author",
    "visitor",
    "guest",
    "player",
    "driver",
    "passenger",
    "applicant",
    "candidate",
    "recipient",
    "sender",
    "holder",
    "consumer",
    "shopper",
    "traveller",
    "traveler",
    "tenant",
    "citizen",
    "instructor",
    "teacher",
    "staff",
    "worker",
    "agent",
];

fn has(w: &[String], x: &str) -> bool {
    w.iter().any(|s| s == x)
}

fn has_any(w: &[String], xs: &[&str]) -> bool {
    w.iter().any(|s| xs.contains(&s.as_str()))
}

fn joined(w: &[String]) -> String {
    w.concat()
}

/// What a column's name says it holds, if anything.
pub fn by_name(column: &str) -> Option<Kind> {
    let w = words(column);
    if w.is_empty() {
        return None;
    }
    let j = joined(&w);
    let id_like = has_any(
        &w,
        &[
            "id", "ids", "key", "ref", "uuid", "guid", "number", "no", "num",
        ],
    );
    // Sensitive first: a card or account number is not a phone number.
    if has_any(&w, &["ssn", "nino", "passport", "aadhaar", "nhs", "sin"])
        || j.contains("socialsecurity")
        || j.contains("nationalinsurance")
        || j.contains("nationalid")
        || j.contains("taxid")
        || j.contains("taxnumber")
        || j.contains("driverslicen")
        || j.contains("driverlicen")
        || j.contains("drivinglicen")
        || j.contains("idcard")
        || (has(&w, "tin") && w.len() <= 2)
    {
        return Some(Kind::GovernmentId);
    }
    if has(&w, "iban") {
        return Some(Kind::Iban);
    }
    if j.contains("cardnumber")
        || j.contains("creditcard")
        || j.contains("debitcard")
        || has_any(&w, &["pan", "cvv", "cvc"])
        || (has(&w, "cc") && id_like)
    {
        return Some(Kind::CardNumber);
    }
    if j.contains("accountnumber")
        || j.contains("bankaccount")
        || j.contains("sortcode")
        || j.contains("routingnumber")
        || has(&w, "bic")
        || has(&w, "swift")
    {
        return Some(Kind::BankAccount);
    }
    if has_any(
        &w,
        &[
            "password",
            "passwd",
            "pwd",
            "secret",
            "pin",
            "otp",
            "passphrase",
        ],
    ) {
        return Some(Kind::Credential);
    }
    if has_any(
        &w,
        &[
            "health",
            "diagnosis",
            "medical",
            "medication",
            "religion",
            "ethnicity",
            "ethnic",
            "race",
            "disability",
            "biometric",
            "genetic",
            "sexuality",
            "orientation",
            "political",
            "union",
            "pregnancy",
            "allergies",
            "allergy",
        ],
    ) {
        return Some(Kind::SpecialCategory);
    }
    if has_any(
        &w,
        &[
            "salary", "income", "wage", "wages", "amount", "balance", "debt", "credit",
        ],
    ) && !has_any(&w, &["total", "avg", "average", "sum"])
    {
        return Some(Kind::Financial);
    }
    if has_any(&w, &["email", "mail", "emails"]) || j.contains("email") {
        return Some(Kind::Email);
    }
    if has_any(
        &w,
        &[
            "phone",
            "phones",
            "mobile",
            "telephone",
            "tel",
            "cell",
            "fax",
            "msisdn",
            "landline",
            "cellphone",
            "smartphone",
        ],
    ) || j.contains("phone")
    {
        return Some(Kind::Phone);
    }
    if has(&w, "ip") || has_any(&w, &["ipv4", "ipv6", "ipaddress"]) || j == "remoteaddr" {
        return Some(Kind::IpAddress);
    }
    if j.contains("useragent")
        || has_any(
            &w,
            &[
                "device",
                "cookie",
                "imei",
                "idfa",
                "gaid",
                "fingerprint",
                "mac",
                "session",
                "anonymous",
                "tracking",
                "advertising",
            ],
        )
    {
        return Some(Kind::OnlineIdentifier);
    }
    if j.contains("dateofbirth")
        || j.contains("birthdate")
        || j.contains("birthday")
        || has_any(&w, &["dob", "birth", "age"])
    {
        return Some(Kind::DateOfBirth);
    }
    if has_any(
        &w,
        &[
            "postcode",
            "zip",
            "zipcode",
            "postal",
            "postalcode",
            "postcodes",
        ],
    ) {
        return Some(Kind::Postcode);
    }
    if has_any(
        &w,
        &[
            "address",
            "addr",
            "street",
            "city",
            "town",
            "house",
            "apartment",
            "county",
            "addresses",
        ],
    ) {
        return Some(Kind::Address);
    }
    if has_any(
        &w,
        &[
            "latitude",
            "longitude",
            "lat",
            "lon",
            "lng",
            "geo",
            "geolocation",
            "coordinates",
            "gps",
        ],
    ) {
        return Some(Kind::Location);
    }
    if has_any(&w, &["gender", "sex"]) {
        return Some(Kind::Gender);
    }
    if has_any(&w, &["username", "nickname"])
        || j.contains("username")
        || ["login", "loginname", "userlogin", "handle", "screenname"].contains(&j.as_str())
    {
        return Some(Kind::Username);
    }
    if j == "fullname"
        || j == "firstname"
        || j == "lastname"
        || j == "surname"
        || j == "forename"
        || j == "givenname"
        || j == "familyname"
        || j == "middlename"
        || j == "maidenname"
        || j == "displayname"
        || (has(&w, "name")
            && (has_any(
                &w,
                &[
                    "full", "first", "last", "given", "family", "middle", "maiden", "display",
                    "legal", "nick", "sur", "fore",
                ],
            ) || has_any(&w, PERSON_WORDS)))
    {
        return Some(Kind::PersonName);
    }
    if has_any(
        &w,
        &[
            "notes",
            "note",
            "comment",
            "comments",
            "remark",
            "remarks",
            "message",
            "messages",
            "body",
            "text",
            "bio",
            "biography",
            "feedback",
            "review",
            "memo",
            "description",
            "transcript",
            "chat",
        ],
    ) && !has_any(&w, &["product", "item", "course", "category", "sku"])
        && !id_like
    {
        return Some(Kind::FreeText);
    }
    if id_like && has_any(&w, PERSON_WORDS) {
        return Some(Kind::PersonIdentifier);
    }
    None
}

/// Words of a field's own name too generic to say anything without its parent's
/// (`contact.name`, `owner.id`).
const GENERIC: &[&str] = &[
    "name", "first", "last", "full", "id", "number", "no", "value", "text", "line", "key", "code",
    "1", "2", "3",
];

/// What a field's name says it holds, for a path into nested columns: its own name
/// (`contact.email` by `email`; `addresses.element.street` by `street`), or, when that is too
/// generic, its path (`contact.name`). A map's keys say nothing by name; a map's values and a
/// list's elements are named by their column (`emails.element` by `emails`).
pub fn by_field_name(path: &str, map_key: bool) -> Option<Kind> {
    if map_key {
        return None;
    }
    let parts: Vec<&str> = path.split('.').filter(|p| *p != "element").collect();
    let parts: &[&str] = match parts.as_slice() {
        [rest @ .., "value"] if path.contains('.') && !rest.is_empty() => rest,
        p => p,
    };
    let own = parts.last().copied().unwrap_or(path);
    if parts.len() == 1 {
        return by_name(own);
    }
    let generic = words(own).iter().all(|w| GENERIC.contains(&w.as_str()));
    if generic {
        by_name(&parts.join("."))
    } else {
        by_name(own)
    }
}

/// A value check.
pub type Check = fn(&str) -> bool;

/// The value patterns, in the order they are tried.
pub const VALUE_CHECKS: &[(Kind, Check)] = &[
    (Kind::Email, is_email),
    (Kind::CardNumber, is_card_number),
    (Kind::Iban, is_iban),
    (Kind::IpAddress, is_ip),
    (Kind::Uuid, is_uuid),
    (Kind::Phone, is_phone),
    (Kind::Postcode, is_postcode),
    (Kind::Address, is_street_address),
];

/// A kind found in values, with its share of the non-null sampled values.
#[derive(Debug, Clone, Serialize)]
pub struct ValueFinding {
    /// The kind.
    pub kind: Kind,
    /// Matching values / non-null sampled values.
    pub share: f64,
    /// Non-null sampled values.
    pub of: usize,
}

/// The kinds at least `min_share` of the non-null `values` match (at most one: the first that
/// reaches the share, in [`VALUE_CHECKS`] order, then free text).
pub fn by_values<'a>(
    values: impl Iterator<Item = &'a str> + Clone,
    min_share: f64,
) -> Option<ValueFinding> {
    let n = values.clone().count();
    if n == 0 {
        return None;
    }
    for (kind, check) in VALUE_CHECKS {
        let hits = values.clone().filter(|v| check(v.trim())).count();
        let share = hits as f64 / n as f64;
        if share >= min_share {
            return Some(ValueFinding {
                kind: *kind,
                share,
                of: n,
            });
        }
    }
    if is_free_text(values.clone()) {
        return Some(ValueFinding {
            kind: Kind::FreeText,
            share: 1.0,
            of: n,
        });
    }
    None
}

/// An email address: `local@domain.tld`, no spaces.
pub fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    if local.is_empty()
        || local.len() > 64
        || domain.contains('@')
        || s.contains(char::is_whitespace)
    {
        return false;
    }
    let Some((host, tld)) = domain.rsplit_once('.') else {
        return false;
    };
    !host.is_empty()
        && tld.len() >= 2
        && tld.chars().all(|c| c.is_ascii_alphabetic())
        && host
            .chars()
            .all(|c| c.is_alphanumeric() || c == '-' || c == '.')
}

/// A phone number with or without separators: an optional `+`, digits with spaces, dots,
/// dashes or parentheses between them, 7 to 15 digits, an optional extension (`x12`, `ext 12`).
/// Digits alone count only from 10 digits on, or with a leading `+` or `0` (plain 7–9 digit
/// numbers are too often something else).
pub fn is_phone(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    let main = match lower.find(" x").or_else(|| lower.find("ext")) {
        Some(i)
            if lower[i..]
                .trim_start_matches([' ', 'x', 'e', 't', '.'])
                .chars()
                .all(|c| c.is_ascii_digit()) =>
        {
            &lower[..i]
        }
        _ => lower.as_str(),
    };
    let main = main.trim();
    if main.is_empty() {
        return false;
    }
    let body = main.strip_prefix('+').unwrap_or(main);
    if !body
        .chars()
        .all(|c| c.is_ascii_digit() || " .-()/".contains(c))
    {
        return false;
    }
    let digits = body.chars().filter(char::is_ascii_digit).count();
    if !(7..=15).contains(&digits) {
        return false;
    }
    let has_sep = body.chars().any(|c| !c.is_ascii_digit());
    if has_sep {
        // Separators between digit groups, not a date (2026-01-31) or a decimal.
        let groups = body
            .split(|c: char| !c.is_ascii_digit())
            .filter(|g| !g.is_empty())
            .count();
        let date_like = body.len() == 10
            && body.chars().filter(|c| *c == '-').count() == 2
            && body.starts_with(['1', '2']);
        return groups >= 2 && !date_like && !body.contains("..");
    }
    main.starts_with('+') || main.starts_with('0') || digits >= 10
}

/// An IPv4 or IPv6 address.
pub fn is_ip(s: &str) -> bool {
    s.parse::<std::net::IpAddr>().is_ok()
}

/// A payment card number: 13 to 19 digits (spaces or dashes allowed) passing the Luhn check.
pub fn is_card_number(s: &str) -> bool {
    if !s
        .chars()
        .all(|c| c.is_ascii_digit() || c == ' ' || c == '-')
    {
        return false;
    }
    let digits: Vec<u32> = s.chars().filter_map(|c| c.to_digit(10)).collect();
    (13..=19).contains(&digits.len()) && luhn(&digits)
}

/// The Luhn checksum.
pub fn luhn(digits: &[u32]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, d)| {
            if i % 2 == 1 {
                let x = d * 2;
                if x > 9 { x - 9 } else { x }
            } else {
                *d
            }
        })
        .sum();
    sum.is_multiple_of(10) && digits.iter().any(|d| *d != 0)
}

/// An IBAN: country code, two check digits, up to 30 letters and digits (spaces allowed),
/// passing the ISO 7064 mod-97 check.
pub fn is_iban(s: &str) -> bool {
    let compact: String = s.chars().filter(|c| *c != ' ').collect();
    let b = compact.as_bytes();
    if !(15..=34).contains(&b.len())
        || !b[..2].iter().all(u8::is_ascii_uppercase)
        || !b[2..4].iter().all(u8::is_ascii_digit)
        || !b[4..]
            .iter()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
    {
        return false;
    }
    let mut rem: u32 = 0;
    for &c in b[4..].iter().chain(&b[..4]) {
        let v = if c.is_ascii_digit() {
            (c - b'0') as u32
        } else {
            (c - b'A') as u32 + 10
        };
        rem = if v >= 10 {
            (rem * 100 + v) % 97
        } else {
            (rem * 10 + v) % 97
        };
    }
    rem == 1
}

/// A UUID in its 8-4-4-4-12 hex form.
pub fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.chars().all(|c| c.is_ascii_hexdigit()))
}

/// A postcode: UK (`LS1 4AB`), US ZIP+4 (`12345-6789`), Canadian (`K1A 0B1`) or Dutch
/// (`1234 AB`). Five digits alone are not counted (too often something else).
pub fn is_postcode(s: &str) -> bool {
    let u = s.trim().to_ascii_uppercase();
    let b = u.as_bytes();
    let alpha = |c: &u8| c.is_ascii_alphabetic();
    let digit = |c: &u8| c.is_ascii_digit();
    // US ZIP+4.
    if b.len() == 10 && b[5] == b'-' && b[..5].iter().all(digit) && b[6..].iter().all(digit) {
        return true;
    }
    // Dutch: 4 digits, space, 2 letters.
    if b.len() == 7 && b[..4].iter().all(digit) && b[4] == b' ' && b[5..].iter().all(alpha) {
        return true;
    }
    // Canadian: A1A 1A1.
    if b.len() == 7
        && alpha(&b[0])
        && digit(&b[1])
        && alpha(&b[2])
        && b[3] == b' '
        && digit(&b[4])
        && alpha(&b[5])
        && digit(&b[6])
    {
        return true;
    }
    // UK: outward (A9, A99, AA9, AA99, A9A, AA9A) + optional space + inward (9AA).
    let Some((out, inw)) = u
        .split_once(' ')
        .or_else(|| (u.len() >= 5).then(|| u.split_at(u.len() - 3)))
    else {
        return false;
    };
    let (o, i) = (out.as_bytes(), inw.as_bytes());
    let inward = i.len() == 3 && digit(&i[0]) && alpha(&i[1]) && alpha(&i[2]);
    let outward = (2..=4).contains(&o.len())
        && alpha(&o[0])
        && o[1..].iter().all(|c| c.is_ascii_alphanumeric())
        && o.iter().filter(|c| c.is_ascii_digit()).count() >= 1
        && (digit(&o[1]) || (o.len() >= 3 && alpha(&o[1]) && digit(&o[2])));
    inward && outward
}

/// Street-address words (the last word of a street name).
const STREET_WORDS: &[&str] = &[
    "street",
    "st",
    "road",
    "rd",
    "lane",
    "ln",
    "avenue",
    "ave",
    "way",
    "close",
    "drive",
    "dr",
    "court",
    "ct",
    "place",
    "pl",
    "square",
    "sq",
    "crescent",
    "terrace",
    "grove",
    "gardens",
    "park",
    "boulevard",
    "blvd",
    "row",
    "mews",
    "hill",
    "walk",
    "strasse",
    "straße",
    "weg",
    "rue",
    "calle",
    "via",
    "highway",
    "hwy",
    "parkway",
    "circle",
    "trail",
];

/// A street address: a house number and a street word (`12 High Street, Leeds`).
pub fn is_street_address(s: &str) -> bool {
    let w = words(s);
    let has_number = s.split(|c: char| c.is_whitespace() || c == ',').any(|t| {
        !t.is_empty()
            && t.trim_end_matches(|c: char| c.is_ascii_alphabetic())
                .chars()
                .all(|c| c.is_ascii_digit())
            && t.starts_with(|c: char| c.is_ascii_digit())
    });
    has_number && w.len() >= 2 && w.iter().any(|x| STREET_WORDS.contains(&x.as_str()))
}

/// Free text: sentences rather than codes — at least four words and 25 characters on average,
/// and mostly distinct values or long ones.
pub fn is_free_text<'a>(values: impl Iterator<Item = &'a str>) -> bool {
    let mut n = 0usize;
    let mut chars = 0usize;
    let mut words_total = 0usize;
    let mut distinct = std::collections::HashSet::new();
    for v in values {
        n += 1;
        chars += v.chars().count();
        words_total += v.split_whitespace().count();
        if distinct.len() < 10_000 {
            distinct.insert(v);
        }
    }
    if n == 0 {
        return false;
    }
    let avg_chars = chars as f64 / n as f64;
    let avg_words = words_total as f64 / n as f64;
    avg_words >= 4.0 && avg_chars >= 25.0 && (distinct.len() >= 3 || avg_chars >= 80.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_cases_and_separators() {
        assert_eq!(words("dateOfBirth"), vec!["date", "of", "birth"]);
        assert_eq!(words("date_of_birth"), vec!["date", "of", "birth"]);
        assert_eq!(words("IPAddress"), vec!["ip", "address"]);
        assert_eq!(words("address_line2"), vec!["address", "line", "2"]);
    }

    #[test]
    fn name_rules() {
        let cases = [
            ("email", Some(Kind::Email)),
            ("contact_email_address", Some(Kind::Email)),
            ("ip_address", Some(Kind::IpAddress)),
            ("phone", Some(Kind::Phone)),
            ("mobileNumber", Some(Kind::Phone)),
            ("full_name", Some(Kind::PersonName)),
            ("customer_name", Some(Kind::PersonName)),
            ("product_name", None),
            ("street_address", Some(Kind::Address)),
            ("city", Some(Kind::Address)),
            ("date_of_birth", Some(Kind::DateOfBirth)),
            ("dob", Some(Kind::DateOfBirth)),
            ("card_number", Some(Kind::CardNumber)),
            ("iban", Some(Kind::Iban)),
            ("ssn", Some(Kind::GovernmentId)),
            ("national_insurance_number", Some(Kind::GovernmentId)),
            ("passport_no", Some(Kind::GovernmentId)),
            ("notes", Some(Kind::FreeText)),
            ("product_description", None),
            ("user_agent", Some(Kind::OnlineIdentifier)),
            ("session_id", Some(Kind::OnlineIdentifier)),
            ("customer_id", Some(Kind::PersonIdentifier)),
            ("course_id", None),
            ("review_id", None),
            ("signed_up_at", None),
            ("status", None),
            ("price", None),
            ("amount", Some(Kind::Financial)),
            ("postcode", Some(Kind::Postcode)),
        ];
        for (name, want) in cases {
            assert_eq!(by_name(name), want, "{name}");
        }
    }

    #[test]
    fn nested_fields_are_named_by_their_own_name_or_their_path() {
        assert_eq!(by_field_name("contact.email", false), Some(Kind::Email));
        assert_eq!(by_field_name("contact.phone", false), Some(Kind::Phone));
        assert_eq!(
            by_field_name("addresses.element.street", false),
            Some(Kind::Address)
        );
        // Too generic alone: the path speaks.
        assert_eq!(by_field_name("contact.name", false), Some(Kind::PersonName));
        // A list's elements and a map's values by their column; a map's keys by nothing.
        assert_eq!(by_field_name("emails.element", false), Some(Kind::Email));
        assert_eq!(by_field_name("emails.value", false), Some(Kind::Email));
        assert_eq!(by_field_name("emails.key", true), None);
        // The parent doesn't make an unremarkable field personal.
        assert_eq!(by_field_name("billing_address.country", false), None);
        assert_eq!(by_field_name("email", false), Some(Kind::Email));
    }

    #[test]
    fn value_patterns() {
        assert!(is_email("ada.abbott1@example.com"));
        assert!(!is_email("not an email@x.com"));
        assert!(!is_email("a@b"));
        for p in [
            "+44 7700 900113",
            "07700 900114",
            "(555) 123-4567",
            "555.123.4567",
            "447700900113",
            "+1-555-010-0000 x12",
        ] {
            assert!(is_phone(p), "{p}");
        }
        for p in ["2026-01-31", "12345", "3.14159", "abc 123", "1234567"] {
            assert!(!is_phone(p), "{p}");
        }
        assert!(is_ip("192.168.0.1") && is_ip("2001:db8::1") && !is_ip("999.1.1.1"));
        assert!(is_card_number("4111 1111 1111 1111"));
        assert!(!is_card_number("4111 1111 1111 1112"));
        assert!(is_iban("GB82 WEST 1234 5698 7654 32"));
        assert!(!is_iban("GB83 WEST 1234 5698 7654 32"));
        assert!(is_uuid("550e8400-e29b-41d4-a716-446655440000"));
        for p in [
            "LS1 4AB",
            "SW1A 1AA",
            "EC1A1BB",
            "12345-6789",
            "K1A 0B1",
            "1012 AB",
        ] {
            assert!(is_postcode(p), "{p}");
        }
        for p in ["12345", "HELLO", "A 1", "gold"] {
            assert!(!is_postcode(p), "{p}");
        }
        assert!(is_street_address("12 High Street, Leeds LS1 4AB"));
        assert!(is_street_address("3690 Anna Lane"));
        assert!(!is_street_address("High Street"));
    }

    #[test]
    fn luhn_on_known_numbers() {
        let d = |s: &str| s.chars().filter_map(|c| c.to_digit(10)).collect::<Vec<_>>();
        assert!(luhn(&d("79927398713")));
        assert!(!luhn(&d("79927398710")));
        assert!(!luhn(&d("0000000000000")));
    }

    #[test]
    fn free_text_and_shares() {
        let notes = [
            "Prefers delivery after six in the evening, ring the bell twice.",
            "Asked us to stop sending the paper catalogue, emails are fine.",
            "Called twice about a damaged parcel and was sent a replacement.",
        ];
        assert!(is_free_text(notes.iter().copied()));
        assert!(!is_free_text(["gold", "silver", "bronze"].iter().copied()));
        assert!(!is_free_text(
            ["Intro to Rust", "Advanced SQL"].iter().copied()
        ));
        let mixed = ["a@b.com", "c@d.org", "x", "e@f.net"];
        let f = by_values(mixed.iter().copied(), 0.7).unwrap();
        assert_eq!(f.kind, Kind::Email);
        assert!((f.share - 0.75).abs() < 1e-9);
        assert!(by_values(mixed.iter().copied(), 0.8).is_none());
    }
}
