//! The enforced query path: `lethe query --as PRINCIPAL "SQL"`.
//!
//! DataFusion over the Iceberg tables, with the access policy ([`crate::access::policy`]) folded into
//! the plan *below* the user's SQL. For each table a principal may read, the session holds a
//! view, never the table: the view is `Projection(masks) <- Filter(row filter) <- TableScan`,
//! and DataFusion's planner inlines it where the user's SQL names the table (the `TableScan` is
//! replaced by the masked projection over the filtered scan, under the table's own name). The
//! user's predicates, joins and aggregates therefore see masked values only: an analyst who
//! filters on a real ID compares it with the pseudonym and gets nothing; a join on
//! pseudonymised IDs works because the pseudonym of a value is the same in every table.
//!
//! The pseudonym is the scalar function `lethe_pseudonym`, HMAC-SHA256 of the value's text
//! under the pseudonym key, first 16 hex characters. The key is captured inside the function
//! object, never a literal in the plan: EXPLAIN shows `lethe_pseudonym(crm.learners.learner_id)`
//! and nothing of the key. The function is not registered in the session, so SQL can't call it
//! on a value of its choosing (which would turn pseudonyms back into IDs).
//!
//! Restrictions ([`crate::requests::scope`]): while a restriction is in force, the view of
//! every table its scope reaches also filters the restricted subject's rows out, under the row
//! filter, for every role but those whose policy says `restricted = "show"`. The filter is
//! `lethe_unrestricted(column)`, a function holding the restricted values: EXPLAIN (VERBOSE,
//! ANALYZE) shows its name and column, never a restricted subject's value. The audit entry
//! names the restriction requests applied.
//!
//! Guarantees:
//! - Only a single `SELECT` (or `EXPLAIN` of one) runs: DDL, DML, `COPY`, `SET`, external
//!   tables and file paths are refused. Every table the SQL names must be one the principal's
//!   role may read; anything else (another table, the consent table for a role that isn't
//!   granted it, a file such as the pseudonym key) is refused before planning.
//! - After planning, every scan in the plan (subqueries included) is checked to be the scan
//!   under one of the session's views.
//! - Every decision is written to the audit log ([`crate::access::audit`]) before the query runs or the
//!   refusal is returned; the log records a hash of the SQL, never its text.
//! - The key never appears in results, EXPLAIN output, logs or errors (tests), and neither
//!   does a restricted subject's value (`privacy::explain_under_a_restriction_…`).
//!
//! Not guaranteed: that a user predicate is evaluated only on rows the row filter keeps (the
//! optimizer may reorder conjuncts; a predicate that errors on hidden rows can reveal that they
//! exist, as PostgreSQL's non-leakproof functions can). Timing is not hidden.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Schema as ArrowSchema, SchemaRef};
use datafusion::catalog::view::ViewTable;
use datafusion::catalog::{MemorySchemaProvider, SchemaProvider, TableProvider};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{Column, ScalarValue, TableReference};
use datafusion::datasource::{provider_as_source, source_as_provider};
use datafusion::execution::context::SQLOptions;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    ColumnarValue, Expr, LogicalPlan, LogicalPlanBuilder, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};
use datafusion::prelude::{SessionConfig, SessionContext, lit};
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::Statement as SqlStatement;
use serde::Serialize;
use sha2::Sha256;

use crate::access::audit::{AuditEntry, AuditLog, Decision, sql_hash};
use crate::access::policy::{Mask, Policy, PseudonymKey, Resolved, TableAccess, row_filter_expr};
use crate::error::{Error, Result};
use crate::governance::Governance;
use crate::workspace::Workspace;

/// The pseudonym function's name, as EXPLAIN shows it.
pub const PSEUDONYM_FN: &str = "lethe_pseudonym";

/// How many hex characters of the HMAC a pseudonym keeps.
pub const PSEUDONYM_CHARS: usize = 16;

/// The pseudonym function: HMAC-SHA256 under a key it holds, first 16 hex characters.
///
/// The text hashed is the value's canonical text: integers in decimal, strings as stored,
/// anything else as Arrow casts it to text. So an ID gives the same pseudonym whether a table
/// stores it as an integer or as text.
pub struct PseudonymUdf {
    /// HMAC-SHA256 with the key's inner and outer blocks already absorbed.
    mac: KeyedSha256,
    /// Tells instances apart for DataFusion's expression equality without looking at the key.
    instance: u64,
    signature: Signature,
    /// Pseudonyms of integer IDs already computed in this session (an ID repeats across rows:
    /// every event of a learner). Bounded by [`CACHE_MAX`].
    cache: std::sync::Mutex<IdCache>,
}

/// Integer ID -> its pseudonym's 16 characters.
type IdCache =
    std::collections::HashMap<i64, [u8; PSEUDONYM_CHARS], std::hash::BuildHasherDefault<IdHasher>>;

/// How many integer IDs a pseudonym function remembers (16 bytes each, plus the map's overhead).
pub const CACHE_MAX: usize = 1 << 20;

/// A multiplicative hash for integer keys (the keys come from the data, not from the query).
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 =
                (self.0.rotate_left(5) ^ u64::from(*b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_i64(&mut self, v: i64) {
        self.0 = (v as u64)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }
}

impl std::fmt::Debug for PseudonymUdf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PseudonymUdf(<key redacted>)")
    }
}

impl PartialEq for PseudonymUdf {
    fn eq(&self, other: &Self) -> bool {
        self.instance == other.instance
    }
}
impl Eq for PseudonymUdf {}
impl Hash for PseudonymUdf {
    fn hash<H: Hasher>(&self, state: &mut H) {
        PSEUDONYM_FN.hash(state);
        self.instance.hash(state);
    }
}

/// HMAC-SHA256 (RFC 2104) with the key absorbed once: the inner and outer SHA-256 states
/// after the key's `ipad` and `opad` blocks. Each tag then costs the message's blocks plus one
/// outer block, straight through `sha2`'s compression function (hardware SHA where the CPU
/// has it), with none of the generic buffering per value. Checked against the `hmac` crate in
/// the tests. Its Debug output shows nothing.
#[derive(Clone)]
struct KeyedSha256 {
    inner: [u32; 8],
    outer: [u32; 8],
}

impl std::fmt::Debug for KeyedSha256 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyedSha256(<redacted>)")
    }
}

/// SHA-256's initial state.
const SHA256_H0: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

impl KeyedSha256 {
    fn new(key: &[u8]) -> KeyedSha256 {
        use sha2::Digest;
        let mut k = [0u8; 64];
        if key.len() > 64 {
            k[..32].copy_from_slice(&Sha256::digest(key));
        } else {
            k[..key.len()].copy_from_slice(key);
        }
        let mut ipad = [0u8; 64];
        let mut opad = [0u8; 64];
        for i in 0..64 {
            ipad[i] = k[i] ^ 0x36;
            opad[i] = k[i] ^ 0x5c;
        }
        let mut inner = SHA256_H0;
        let mut outer = SHA256_H0;
        sha2::block_api::compress256(&mut inner, &[ipad]);
        sha2::block_api::compress256(&mut outer, &[opad]);
        KeyedSha256 { inner, outer }
    }

    /// The HMAC of `msg`, as SHA-256's eight state words.
    fn tag(&self, msg: &[u8]) -> [u32; 8] {
        let mut state = self.inner;
        // The key block (64 bytes) precedes the message in the inner hash.
        let bits = (64 + msg.len() as u64) * 8;
        if msg.len() < 56 {
            // One block: an ID, an email address.
            let mut block = [0u8; 64];
            block[..msg.len()].copy_from_slice(msg);
            block[msg.len()] = 0x80;
            block[56..].copy_from_slice(&bits.to_be_bytes());
            sha2::block_api::compress256(&mut state, &[block]);
        } else {
            let mut chunks = msg.chunks_exact(64);
            for c in &mut chunks {
                let mut block = [0u8; 64];
                block.copy_from_slice(c);
                sha2::block_api::compress256(&mut state, &[block]);
            }
            finish(&mut state, chunks.remainder(), bits);
        }
        // The outer hash: the inner digest, padded, in one block.
        let mut block = [0u8; 64];
        for (i, w) in state.iter().enumerate() {
            block[4 * i..4 * i + 4].copy_from_slice(&w.to_be_bytes());
        }
        block[32] = 0x80;
        block[56..].copy_from_slice(&((64u64 + 32) * 8).to_be_bytes());
        let mut out = self.outer;
        sha2::block_api::compress256(&mut out, &[block]);
        out
    }
}

/// SHA-256's final padding of `rest` (fewer than 64 bytes), for a message of `bits` bits.
fn finish(state: &mut [u32; 8], rest: &[u8], bits: u64) {
    let mut block = [0u8; 64];
    block[..rest.len()].copy_from_slice(rest);
    block[rest.len()] = 0x80;
    if rest.len() >= 56 {
        sha2::block_api::compress256(state, &[block]);
        block = [0u8; 64];
    }
    block[56..].copy_from_slice(&bits.to_be_bytes());
    sha2::block_api::compress256(state, &[block]);
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl PseudonymUdf {
    /// The function under `key`.
    pub fn new(key: &PseudonymKey) -> Result<PseudonymUdf> {
        Ok(PseudonymUdf {
            mac: KeyedSha256::new(key.expose()),
            instance: rand::random(),
            signature: Signature::any(1, Volatility::Immutable),
            cache: std::sync::Mutex::new(IdCache::default()),
        })
    }

    /// The pseudonym of one value's text.
    pub fn pseudonym(&self, text: &[u8]) -> String {
        let mut out = [0u8; PSEUDONYM_CHARS];
        self.write_pseudonym(text, &mut out);
        out.iter().map(|b| *b as char).collect()
    }

    fn write_pseudonym(&self, text: &[u8], out: &mut [u8; PSEUDONYM_CHARS]) {
        let tag = self.mac.tag(text);
        // The first 8 bytes of the tag are its first two words, big-endian.
        for (w, word) in tag[..2].iter().enumerate() {
            for k in 0..8 {
                let nibble = (word >> (28 - 4 * k)) & 0x0f;
                out[8 * w + k] = HEX[nibble as usize];
            }
        }
    }

    /// Pseudonymises an array (nulls stay null). Values are first cast to text by Arrow's
    /// cast kernel (integers in decimal), then hashed; the output is built in one buffer.
    pub fn pseudonymise(&self, a: &ArrayRef) -> Result<ArrayRef> {
        if matches!(
            a.data_type(),
            DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::UInt8
                | DataType::UInt16
                | DataType::UInt32
        ) {
            return self.pseudonymise_ints(a);
        }
        let text = match a.data_type() {
            DataType::Utf8 => a.clone(),
            _ => arrow::compute::cast(a, &DataType::Utf8)?,
        };
        let s = text.as_string::<i32>();
        let n = s.len();
        if n > (i32::MAX as usize) / PSEUDONYM_CHARS {
            return Err(Error::Internal("batch too large to pseudonymise".into()));
        }
        let offsets = s.value_offsets();
        let data = s.value_data();
        let nulls = s.nulls().cloned();
        let mut values = vec![b'0'; n * PSEUDONYM_CHARS];
        let mut out_offsets: Vec<i32> = Vec::with_capacity(n + 1);
        let mut at = 0i32;
        out_offsets.push(0);
        for i in 0..n {
            at += PSEUDONYM_CHARS as i32;
            out_offsets.push(at);
            if nulls.as_ref().is_some_and(|b| b.is_null(i)) {
                continue;
            }
            let value = &data[offsets[i] as usize..offsets[i + 1] as usize];
            let tag = self.mac.tag(value);
            let out = &mut values[i * PSEUDONYM_CHARS..(i + 1) * PSEUDONYM_CHARS];
            let [a, b, c, d] = tag[0].to_be_bytes();
            let [e, f, g, h] = tag[1].to_be_bytes();
            for (k, byte) in [a, b, c, d, e, f, g, h].into_iter().enumerate() {
                let [hi, lo] = HEX2[byte as usize];
                out[2 * k] = hi;
                out[2 * k + 1] = lo;
            }
        }
        let array = arrow::array::StringArray::try_new(
            arrow::buffer::OffsetBuffer::new(arrow::buffer::ScalarBuffer::from(out_offsets)),
            arrow::buffer::Buffer::from_vec(values),
            nulls,
        )?;
        Ok(Arc::new(array))
    }
}

impl PseudonymUdf {
    /// Integer IDs: the cache first; the misses hashed outside the lock, then remembered.
    fn pseudonymise_ints(&self, a: &ArrayRef) -> Result<ArrayRef> {
        let ints = arrow::compute::cast(a, &DataType::Int64)?;
        let ints = ints.as_primitive::<arrow::datatypes::Int64Type>();
        let n = ints.len();
        if n > (i32::MAX as usize) / PSEUDONYM_CHARS {
            return Err(Error::Internal("batch too large to pseudonymise".into()));
        }
        let nulls = ints.nulls().cloned();
        let raw = ints.values();
        let mut values = vec![b'0'; n * PSEUDONYM_CHARS];
        let mut misses: Vec<usize> = Vec::new();
        {
            let cache = self
                .cache
                .lock()
                .map_err(|_| Error::Internal("pseudonym cache poisoned".into()))?;
            for (i, v) in raw.iter().enumerate() {
                if nulls.as_ref().is_some_and(|b| b.is_null(i)) {
                    continue;
                }
                match cache.get(v) {
                    Some(p) => {
                        values[i * PSEUDONYM_CHARS..(i + 1) * PSEUDONYM_CHARS].copy_from_slice(p)
                    }
                    None => misses.push(i),
                }
            }
        }
        if !misses.is_empty() {
            let mut digits = [0u8; 20];
            let mut learned = Vec::with_capacity(misses.len());
            for i in misses {
                let len = decimal(raw[i], &mut digits);
                let mut p = [0u8; PSEUDONYM_CHARS];
                self.write_pseudonym(&digits[20 - len..], &mut p);
                values[i * PSEUDONYM_CHARS..(i + 1) * PSEUDONYM_CHARS].copy_from_slice(&p);
                learned.push((raw[i], p));
            }
            let mut cache = self
                .cache
                .lock()
                .map_err(|_| Error::Internal("pseudonym cache poisoned".into()))?;
            for (v, p) in learned {
                if cache.len() >= CACHE_MAX {
                    break;
                }
                cache.insert(v, p);
            }
        }
        let offsets: Vec<i32> = (0..=n).map(|i| (i * PSEUDONYM_CHARS) as i32).collect();
        let array = arrow::array::StringArray::try_new(
            arrow::buffer::OffsetBuffer::new(arrow::buffer::ScalarBuffer::from(offsets)),
            arrow::buffer::Buffer::from_vec(values),
            nulls,
        )?;
        Ok(Arc::new(array))
    }
}

/// Writes `v` in decimal at the end of `out` (as Arrow casts it to text); returns how many
/// bytes it used.
fn decimal(v: i64, out: &mut [u8; 20]) -> usize {
    let neg = v < 0;
    let mut u = v.unsigned_abs();
    let mut i = out.len();
    loop {
        i -= 1;
        out[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if neg {
        i -= 1;
        out[i] = b'-';
    }
    out.len() - i
}

/// Two hex digits per byte.
const HEX2: [[u8; 2]; 256] = {
    let mut t = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = [HEX[i >> 4], HEX[i & 0x0f]];
        i += 1;
    }
    t
};

impl ScalarUDFImpl for PseudonymUdf {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        PSEUDONYM_FN
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> datafusion::error::Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::error::Result<ColumnarValue> {
        let [arg] = args.args.as_slice() else {
            return datafusion::common::exec_err!("{PSEUDONYM_FN} takes one argument");
        };
        let to_df = |e: Error| datafusion::error::DataFusionError::Execution(e.to_string());
        match arg {
            ColumnarValue::Array(a) => {
                Ok(ColumnarValue::Array(self.pseudonymise(a).map_err(to_df)?))
            }
            ColumnarValue::Scalar(s) => {
                let a = s.to_array_of_size(1)?;
                let out = self.pseudonymise(&a).map_err(to_df)?;
                Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
            }
        }
    }
}

/// The result of an enforced query.
#[derive(Debug, Clone)]
pub struct QueryResult {
    /// The result's schema.
    pub schema: SchemaRef,
    /// The rows.
    pub batches: Vec<RecordBatch>,
    /// The audit entry written for it.
    pub audit: AuditEntry,
}

impl QueryResult {
    /// Rows in the result.
    pub fn rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }

    /// The result as an aligned text table.
    pub fn to_text(&self) -> Result<String> {
        if self.batches.is_empty() {
            let headers: Vec<&str> = self
                .schema
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect();
            return Ok(format!("{}\n(0 rows)", headers.join(" | ")));
        }
        Ok(format!(
            "{}\n({} row{})",
            arrow::util::pretty::pretty_format_batches(&self.batches)?,
            self.rows(),
            if self.rows() == 1 { "" } else { "s" }
        ))
    }

    /// The rows as JSON objects.
    pub fn to_json(&self) -> Result<Vec<serde_json::Value>> {
        let mut w = arrow::json::ArrayWriter::new(Vec::new());
        let batches: Vec<&RecordBatch> = self.batches.iter().collect();
        w.write_batches(&batches)?;
        w.finish()?;
        let bytes = w.into_inner();
        if bytes.is_empty() {
            return Ok(Vec::new());
        }
        Ok(serde_json::from_slice(&bytes)?)
    }
}

/// What the policy decided about one table for a session.
#[derive(Debug, Clone, Serialize)]
pub struct TableDecision {
    /// The table.
    pub table: String,
    /// Readable or not.
    pub allowed: bool,
    /// The rules applied (when allowed) or the reason (when not).
    pub detail: Vec<String>,
}

/// The policy loaded and checked against the catalog; opens sessions for principals.
pub struct Enforcer {
    ws: Workspace,
    gov: Governance,
    policy: Policy,
    /// Every catalog table's provider (never registered in a session) and schema.
    tables: BTreeMap<String, Arc<dyn TableProvider>>,
    /// The restrictions in force.
    restrictions: crate::requests::scope::Restrictions,
}

impl std::fmt::Debug for Enforcer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Enforcer")
            .field("policy", &self.policy.file.path)
            .field("tables", &self.tables.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Every catalog table's DataFusion provider, by `namespace.table`.
pub async fn providers(ws: &Workspace) -> Result<BTreeMap<String, Arc<dyn TableProvider>>> {
    let mut out: BTreeMap<String, Arc<dyn TableProvider>> = BTreeMap::new();
    for name in ws.warehouse.tables().await? {
        let table = ws.warehouse.load(&name).await?;
        out.insert(
            name.to_string(),
            crate::pipeline::table_provider(ws, &table).await?,
        );
    }
    Ok(out)
}

impl Enforcer {
    /// Loads the governance files and the policy and checks the policy against the catalog.
    pub async fn open(ws: &Workspace) -> Result<Enforcer> {
        let gov = ws.governance()?;
        let policy = Policy::load(&gov.dir)?;
        let tables = providers(ws).await?;
        let schemas: BTreeMap<String, ArrowSchema> = tables
            .iter()
            .map(|(n, p)| (n.clone(), p.schema().as_ref().clone()))
            .collect();
        policy.check(&schemas, &gov)?;
        let restrictions = crate::requests::scope::Restrictions::active(&ws.config.paths.state)?;
        Ok(Enforcer {
            ws: ws.clone(),
            gov,
            policy,
            tables,
            restrictions,
        })
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// What the policy decides for every table, for a principal (`lethe policy show`).
    pub fn decisions(&self, principal: &str) -> std::result::Result<Vec<TableDecision>, String> {
        let r = self.policy.resolve(principal)?;
        Ok(self
            .tables
            .iter()
            .map(|(t, p)| {
                let cols = column_names(p.schema().as_ref());
                match self.policy.access(&r, t, &cols, &self.gov) {
                    Ok(a) => TableDecision {
                        table: t.clone(),
                        allowed: true,
                        detail: a.rules(),
                    },
                    Err(why) => TableDecision {
                        table: t.clone(),
                        allowed: false,
                        detail: vec![why],
                    },
                }
            })
            .collect())
    }

    /// A session for `principal`: a view for every table its role may read. Refuses (and
    /// audits) an unknown principal, a principal in no role, and a missing pseudonym key when
    /// the role pseudonymises something.
    pub async fn session(&self, principal: &str) -> Result<Session> {
        self.session_for(principal, None).await
    }

    async fn session_for(&self, principal: &str, sql: Option<&str>) -> Result<Session> {
        let audit = AuditLog::in_state(&self.ws.config.paths.state);
        let deny = |role: Option<String>, reason: String| -> Error {
            let entry = AuditEntry {
                time: self.ws.clock.now(),
                principal: principal.to_string(),
                role,
                tables: Vec::new(),
                rules: Vec::new(),
                decision: Decision::Deny,
                reason: Some(reason.clone()),
                sql_sha256: sql.map(sql_hash).unwrap_or_default(),
            };
            match audit.record(&entry) {
                Ok(()) => Error::Refused(reason),
                Err(e) => e,
            }
        };
        let r = match self.policy.resolve(principal) {
            Ok(r) => r,
            Err(why) => return Err(deny(None, why)),
        };
        match self.build_session(&r).await {
            Ok(s) => Ok(s),
            Err(Error::Refused(why)) => Err(deny(Some(r.role_name.to_string()), why)),
            Err(e) => Err(e),
        }
    }

    async fn build_session(&self, r: &Resolved<'_>) -> Result<Session> {
        let mut grants: BTreeMap<String, TableAccess> = BTreeMap::new();
        let mut denied: BTreeMap<String, String> = BTreeMap::new();
        for (t, p) in &self.tables {
            let cols = column_names(p.schema().as_ref());
            match self.policy.access(r, t, &cols, &self.gov) {
                Ok(a) => {
                    grants.insert(t.clone(), a);
                }
                Err(why) => {
                    denied.insert(t.clone(), why);
                }
            }
        }
        let needs_key = grants
            .values()
            .any(|a| a.columns.iter().any(|(_, m)| *m == Mask::Pseudonym));
        let udf = if needs_key {
            let key = PseudonymKey::load(&self.ws.config.paths.state)?;
            Some(Arc::new(ScalarUDF::new_from_impl(PseudonymUdf::new(&key)?)))
        } else {
            None
        };
        let ctx =
            SessionContext::new_with_config(SessionConfig::new().with_information_schema(false));
        let catalog = ctx
            .catalog("datafusion")
            .ok_or_else(|| Error::Internal("DataFusion has no default catalog".into()))?;
        let mut schemas: BTreeMap<String, Arc<MemorySchemaProvider>> = BTreeMap::new();
        let mut scans: HashSet<usize> = HashSet::new();
        let mut restricted: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (t, a) in &grants {
            let raw = self
                .tables
                .get(t)
                .ok_or_else(|| Error::Internal(format!("no provider for {t}")))?;
            scans.insert(Arc::as_ptr(raw) as *const () as usize);
            let (ns, name) = t
                .rsplit_once('.')
                .ok_or_else(|| Error::Internal(format!("`{t}` is not ns.table")))?;
            let restriction = match r.role.restricted {
                crate::access::policy::Restricted::Show => None,
                crate::access::policy::Restricted::Hide => self.restrictions.filter(t),
            };
            if let Some((_, reqs)) = &restriction {
                restricted.insert(t.clone(), reqs.clone());
            }
            let view = view_plan(
                t,
                raw.clone(),
                a,
                r.attributes,
                udf.as_ref(),
                restriction.as_ref().map(|(e, _)| e),
            )?;
            let schema = match schemas.get(ns) {
                Some(s) => s.clone(),
                None => {
                    let s = Arc::new(MemorySchemaProvider::new());
                    catalog.register_schema(ns, s.clone())?;
                    schemas.insert(ns.to_string(), s.clone());
                    s
                }
            };
            schema.register_table(name.to_string(), Arc::new(ViewTable::new(view, None)))?;
        }
        Ok(Session {
            ctx,
            principal: r.principal.to_string(),
            role: r.role_name.to_string(),
            grants,
            denied,
            scans,
            restricted,
            audit: AuditLog::in_state(&self.ws.config.paths.state),
            clock: self.ws.clock.clone(),
        })
    }
}

fn column_names(s: &ArrowSchema) -> Vec<(String, arrow::datatypes::DataType)> {
    s.fields()
        .iter()
        .map(|f| (f.name().clone(), f.data_type().clone()))
        .collect()
}

/// The view of one table: `Projection(masks) <- Filter(row filter) <- Filter(restriction) <-
/// TableScan(raw)`.
fn view_plan(
    table: &str,
    raw: Arc<dyn TableProvider>,
    access: &TableAccess,
    attributes: &BTreeMap<String, String>,
    udf: Option<&Arc<ScalarUDF>>,
    restriction: Option<&Expr>,
) -> Result<LogicalPlan> {
    let tref = TableReference::from(table);
    let schema = raw.schema();
    let mut b = LogicalPlanBuilder::scan(tref.clone(), provider_as_source(raw), None)?;
    if let Some(keep) = restriction {
        b = b.filter(keep.clone())?;
    }
    if let Some(text) = &access.row_filter {
        let e = row_filter_expr(text, b.schema(), Some(attributes)).map_err(|why| {
            Error::Refused(format!("the row filter of `{table}` can't apply: {why}"))
        })?;
        b = b.filter(e)?;
    }
    let mut exprs = Vec::with_capacity(access.columns.len());
    for (c, m) in &access.columns {
        let field = schema.field_with_name(c)?;
        let column = Expr::Column(Column::new(Some(tref.clone()), c.clone()));
        let e = match m {
            Mask::Clear => column,
            Mask::Null => Expr::Literal(ScalarValue::try_from(field.data_type())?, None),
            Mask::Pseudonym => {
                let udf = udf.ok_or_else(|| Error::Internal("no pseudonym function".into()))?;
                Expr::ScalarFunction(ScalarFunction::new_udf(udf.clone(), vec![column]))
            }
            Mask::Year => {
                datafusion::functions::datetime::date_part().call(vec![lit("year"), column])
            }
            Mask::Prefix(n) => {
                datafusion::functions::unicode::left().call(vec![column, lit(i64::from(*n))])
            }
        };
        exprs.push(e.alias(c.clone()));
    }
    Ok(b.project(exprs)?.build()?)
}

/// A principal's session: the views of the tables its role may read.
pub struct Session {
    ctx: SessionContext,
    principal: String,
    role: String,
    grants: BTreeMap<String, TableAccess>,
    denied: BTreeMap<String, String>,
    /// Addresses of the raw providers under the views (the only scans a plan may hold).
    scans: HashSet<usize>,
    /// Tables whose views leave restricted subjects out, with the restriction requests.
    restricted: BTreeMap<String, Vec<String>>,
    audit: AuditLog,
    clock: Arc<dyn lethe_iceberg::clock::Clock>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("principal", &self.principal)
            .field("role", &self.role)
            .field("tables", &self.grants.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The catalog table a reference names (`crm.learners`), if it names one the enforcer knows
/// the shape of; otherwise the reference as written.
fn reference_name(r: &TableReference) -> std::result::Result<String, String> {
    match r {
        TableReference::Partial { schema, table } => Ok(format!("{schema}.{table}")),
        TableReference::Full {
            catalog,
            schema,
            table,
        } if catalog.as_ref() == "datafusion" => Ok(format!("{schema}.{table}")),
        other => Err(other.to_string()),
    }
}

impl Session {
    /// The principal.
    pub fn principal(&self) -> &str {
        &self.principal
    }

    /// The tables this session can read.
    pub fn tables(&self) -> impl Iterator<Item = &str> {
        self.grants.keys().map(String::as_str)
    }

    fn entry(
        &self,
        sql: &str,
        tables: Vec<String>,
        rules: Vec<String>,
        decision: Decision,
        reason: Option<String>,
    ) -> AuditEntry {
        AuditEntry {
            time: self.clock.now(),
            principal: self.principal.clone(),
            role: Some(self.role.clone()),
            tables,
            rules,
            decision,
            reason,
            sql_sha256: sql_hash(sql),
        }
    }

    fn deny(&self, sql: &str, tables: Vec<String>, reason: String) -> Error {
        let e = self.entry(
            sql,
            tables,
            Vec::new(),
            Decision::Deny,
            Some(reason.clone()),
        );
        match self.audit.record(&e) {
            Ok(()) => Error::Refused(reason),
            Err(err) => err,
        }
    }

    /// Plans `sql` under the policy, audits the decision, and returns the plan (not run).
    pub async fn plan(&self, sql: &str) -> Result<(LogicalPlan, AuditEntry)> {
        let state = self.ctx.state();
        let statement = match state.sql_to_statement(sql, &datafusion::config::Dialect::Generic) {
            Ok(s) => s,
            Err(_) => {
                return Err(self.deny(
                    sql,
                    Vec::new(),
                    "the SQL does not parse as one statement".into(),
                ));
            }
        };
        let query_only = |s: &DFStatement| matches!(s, DFStatement::Statement(b) if matches!(b.as_ref(), SqlStatement::Query(_)));
        let allowed_kind = match &statement {
            DFStatement::Explain(e) => query_only(&e.statement),
            s => query_only(s),
        };
        if !allowed_kind {
            return Err(self.deny(
                sql,
                Vec::new(),
                "only a SELECT query (or EXPLAIN of one) may run through lethe query".into(),
            ));
        }
        let refs = match state.resolve_table_references(&statement) {
            Ok(r) => r,
            Err(_) => {
                return Err(self.deny(
                    sql,
                    Vec::new(),
                    "the SQL's tables can't be resolved".into(),
                ));
            }
        };
        let mut tables: BTreeSet<String> = BTreeSet::new();
        let mut refusals: Vec<String> = Vec::new();
        for r in &refs {
            match reference_name(r) {
                Ok(t) if self.grants.contains_key(&t) => {
                    tables.insert(t);
                }
                Ok(t) => {
                    refusals.push(match self.denied.get(&t) {
                        Some(why) => why.clone(),
                        None => format!("`{t}` is not a table of the catalog"),
                    });
                    tables.insert(t);
                }
                Err(shown) => {
                    refusals.push(format!(
                        "`{shown}` is not a table of the catalog (name tables as namespace.table)"
                    ));
                    tables.insert(shown);
                }
            }
        }
        let tables: Vec<String> = tables.into_iter().collect();
        if !refusals.is_empty() {
            refusals.dedup();
            return Err(self.deny(sql, tables, refusals.join("; ")));
        }
        let plan = match state.statement_to_plan(statement).await {
            Ok(p) => p,
            Err(e) => {
                // The user sees DataFusion's message (it may quote their SQL); the audit log
                // gets no text of the SQL.
                let _ = self.deny(sql, tables, "the query does not plan".into());
                return Err(Error::DataFusion(e));
            }
        };
        let options = SQLOptions::new()
            .with_allow_ddl(false)
            .with_allow_dml(false)
            .with_allow_statements(false);
        if options.verify_plan(&plan).is_err() {
            return Err(self.deny(
                sql,
                tables,
                "only a SELECT query (or EXPLAIN of one) may run through lethe query".into(),
            ));
        }
        if let Err(why) = self.check_scans(&plan) {
            return Err(self.deny(sql, tables, why));
        }
        let mut rules: Vec<String> = tables
            .iter()
            .filter_map(|t| self.grants.get(t))
            .flat_map(TableAccess::rules)
            .collect();
        for t in &tables {
            if let Some(reqs) = self.restricted.get(t) {
                rules.push(format!("restriction {t}: {}", reqs.join(", ")));
            }
        }
        let entry = self.entry(sql, tables, rules, Decision::Allow, None);
        self.audit.record(&entry)?;
        Ok((plan, entry))
    }

    /// Every scan in the plan (subqueries included) must be the raw scan under a view.
    fn check_scans(&self, plan: &LogicalPlan) -> std::result::Result<(), String> {
        let mut bad: Option<String> = None;
        plan.apply_with_subqueries(|node| {
            if let LogicalPlan::TableScan(scan) = node {
                let ok = source_as_provider(&scan.source)
                    .map(|p| {
                        self.scans
                            .contains(&(Arc::as_ptr(&p) as *const () as usize))
                    })
                    .unwrap_or(false);
                if !ok {
                    bad = Some(format!(
                        "the plan reads `{}` outside the policy's views",
                        scan.table_name
                    ));
                    return Ok(TreeNodeRecursion::Stop);
                }
            }
            Ok(TreeNodeRecursion::Continue)
        })
        .map_err(|e| e.to_string())?;
        match bad {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }

    /// Runs `sql` under the policy (audited) and collects the result.
    pub async fn query(&self, sql: &str) -> Result<QueryResult> {
        let (plan, audit) = self.plan(sql).await?;
        tracing::debug!(
            tables = audit.tables.len(),
            rules = audit.rules.len(),
            "query planned under the policy"
        );
        let df = self.ctx.execute_logical_plan(plan).await?;
        let schema: SchemaRef = Arc::new(df.schema().as_arrow().clone());
        let batches = df.collect().await?;
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        tracing::debug!(rows, "query answered");
        Ok(QueryResult {
            schema,
            batches,
            audit,
        })
    }
}

/// `lethe query --as PRINCIPAL "SQL"`: opens the policy, a session for the principal, and runs
/// the query. Every refusal — including a policy that doesn't match the catalog — is audited.
pub async fn query(ws: &Workspace, principal: &str, sql: &str) -> Result<QueryResult> {
    let enforcer = match Enforcer::open(ws).await {
        Ok(e) => e,
        Err(e) => {
            let reason = format!("the access policy can't be used: {e}");
            AuditLog::in_state(&ws.config.paths.state).record(&AuditEntry {
                time: ws.clock.now(),
                principal: principal.to_string(),
                role: None,
                tables: Vec::new(),
                rules: Vec::new(),
                decision: Decision::Deny,
                reason: Some(reason.clone()),
                sql_sha256: sql_hash(sql),
            })?;
            return Err(Error::Refused(reason));
        }
    };
    let session = enforcer.session_for(principal, Some(sql)).await?;
    session.query(sql).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udf() -> PseudonymUdf {
        PseudonymUdf::new(
            &PseudonymKey::from_bytes(b"0123456789abcdef0123456789abcdef".to_vec()).unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn pseudonym_is_hmac_sha256_prefix_of_the_text() {
        use hmac::{Hmac, KeyInit, Mac};
        let u = udf();
        let mut m =
            <Hmac<Sha256> as KeyInit>::new_from_slice(b"0123456789abcdef0123456789abcdef").unwrap();
        m.update(b"3590");
        let full = hex::encode(m.finalize().into_bytes());
        assert_eq!(u.pseudonym(b"3590"), full[..16]);
    }

    #[test]
    fn keyed_sha256_is_hmac_sha256_for_every_length_and_key_size() {
        use hmac::{Hmac, KeyInit, Mac};
        use rand::{Rng, SeedableRng};
        let seed = std::env::var("LETHE_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(7u64);
        eprintln!("seed: {seed} (set LETHE_TEST_SEED to replay)");
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        for key_len in [16usize, 32, 63, 64, 65, 100] {
            let key: Vec<u8> = (0..key_len).map(|_| rng.random()).collect();
            let k = KeyedSha256::new(&key);
            for len in (0..140).chain([1000, 4096]) {
                let msg: Vec<u8> = (0..len).map(|_| rng.random()).collect();
                let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&key).unwrap();
                m.update(&msg);
                let want = m.finalize().into_bytes();
                let got: Vec<u8> = k.tag(&msg).iter().flat_map(|w| w.to_be_bytes()).collect();
                assert_eq!(
                    got.as_slice(),
                    want.as_slice(),
                    "key {key_len} bytes, message {len}"
                );
            }
        }
    }

    #[test]
    fn integers_and_their_text_give_the_same_pseudonym() {
        let u = udf();
        let ints: ArrayRef = Arc::new(arrow::array::Int64Array::from(vec![
            Some(3590),
            None,
            Some(-7),
            Some(0),
        ]));
        let strs: ArrayRef = Arc::new(arrow::array::StringArray::from(vec![
            Some("3590"),
            None,
            Some("-7"),
            Some("0"),
        ]));
        let small: ArrayRef = Arc::new(arrow::array::Int32Array::from(vec![
            Some(3590),
            None,
            Some(-7),
            Some(0),
        ]));
        let a = u.pseudonymise(&ints).unwrap();
        let b = u.pseudonymise(&strs).unwrap();
        let c = u.pseudonymise(&small).unwrap();
        assert_eq!(a.as_ref(), b.as_ref());
        assert_eq!(a.as_ref(), c.as_ref());
        assert!(a.is_null(1));
        let s = a.as_string::<i32>();
        assert_eq!(s.value(0).len(), 16);
        assert!(s.value(0).chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn decimals_match_arrows_text() {
        let mut buf = [0u8; 20];
        let vals = [0i64, 7, -7, 3590, i64::MAX, i64::MIN];
        let a: ArrayRef = Arc::new(arrow::array::Int64Array::from(vals.to_vec()));
        let text = arrow::compute::cast(&a, &DataType::Utf8).unwrap();
        for (i, v) in vals.iter().enumerate() {
            let n = decimal(*v, &mut buf);
            assert_eq!(
                std::str::from_utf8(&buf[20 - n..]).unwrap(),
                text.as_string::<i32>().value(i)
            );
        }
    }

    #[test]
    fn the_cache_gives_what_hashing_gives() {
        let u = udf();
        let a: ArrayRef = Arc::new(arrow::array::Int64Array::from(vec![
            Some(5),
            Some(5),
            None,
            Some(9),
            Some(5),
        ]));
        let first = u.pseudonymise(&a).unwrap();
        let second = u.pseudonymise(&a).unwrap();
        assert_eq!(first.as_ref(), second.as_ref());
        let s = first.as_string::<i32>();
        assert_eq!(s.value(0), u.pseudonym(b"5"));
        assert_eq!(s.value(3), u.pseudonym(b"9"));
        assert!(s.is_null(2));
        assert_eq!(u.cache.lock().unwrap().len(), 2);
    }

    #[test]
    fn debug_hides_the_key() {
        let u = udf();
        assert_eq!(format!("{u:?}"), "PseudonymUdf(<key redacted>)");
        let f = ScalarUDF::new_from_impl(udf());
        assert!(!format!("{f:?}").contains("0123456789abcdef"));
    }
}
