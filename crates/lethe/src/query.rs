//! The enforced query path: `lethe query --as PRINCIPAL "SQL"`.
//!
//! DataFusion over the Iceberg tables, with the access policy ([`crate::policy`]) folded into
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
//! Guarantees:
//! - Only a single `SELECT` (or `EXPLAIN` of one) runs: DDL, DML, `COPY`, `SET`, external
//!   tables and file paths are refused. Every table the SQL names must be one the principal's
//!   role may read; anything else (another table, the consent table for a role that isn't
//!   granted it, a file such as the pseudonym key) is refused before planning.
//! - After planning, every scan in the plan (subqueries included) is checked to be the scan
//!   under one of the session's views.
//! - Every decision is written to the audit log ([`crate::audit`]) before the query runs or the
//!   refusal is returned; the log records a hash of the SQL, never its text.
//! - The key never appears in results, EXPLAIN output, logs or errors (tests).
//!
//! Not guaranteed: that a user predicate is evaluated only on rows the row filter keeps (the
//! optimizer may reorder conjuncts; a predicate that errors on hidden rows can reveal that they
//! exist, as PostgreSQL's non-leakproof functions can). Timing is not hidden.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Int64Type, Schema as ArrowSchema, SchemaRef};
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
use hmac::{Hmac, KeyInit, Mac};
use iceberg_datafusion::IcebergStaticTableProvider;
use serde::Serialize;
use sha2::Sha256;

use crate::audit::{AuditEntry, AuditLog, Decision, sql_hash};
use crate::error::{Error, Result};
use crate::governance::Governance;
use crate::policy::{Mask, Policy, PseudonymKey, Resolved, TableAccess, row_filter_expr};
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
    /// The HMAC state after absorbing the key (cloned per value).
    mac: Hmac<Sha256>,
    /// Tells instances apart for DataFusion's expression equality without looking at the key.
    instance: u64,
    signature: Signature,
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

const HEX: &[u8; 16] = b"0123456789abcdef";

impl PseudonymUdf {
    /// The function under `key`.
    pub fn new(key: &PseudonymKey) -> Result<PseudonymUdf> {
        let mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key.expose())
            .map_err(|_| Error::Internal("HMAC refused the pseudonym key".into()))?;
        Ok(PseudonymUdf {
            mac,
            instance: rand::random(),
            signature: Signature::any(1, Volatility::Immutable),
        })
    }

    /// The pseudonym of one value's text.
    pub fn pseudonym(&self, text: &[u8]) -> String {
        let mut out = [0u8; PSEUDONYM_CHARS];
        self.write_pseudonym(text, &mut out);
        out.iter().map(|b| *b as char).collect()
    }

    fn write_pseudonym(&self, text: &[u8], out: &mut [u8; PSEUDONYM_CHARS]) {
        let mut m = self.mac.clone();
        m.update(text);
        let tag = m.finalize().into_bytes();
        for (i, b) in tag.iter().take(PSEUDONYM_CHARS / 2).enumerate() {
            out[2 * i] = HEX[(b >> 4) as usize];
            out[2 * i + 1] = HEX[(b & 0x0f) as usize];
        }
    }

    /// Pseudonymises an array (nulls stay null).
    pub fn pseudonymise(&self, a: &ArrayRef) -> Result<ArrayRef> {
        let n = a.len();
        let mut b = StringBuilder::with_capacity(n, n * PSEUDONYM_CHARS);
        let mut buf = [0u8; PSEUDONYM_CHARS];
        let mut push = |b: &mut StringBuilder, text: Option<&[u8]>| -> Result<()> {
            match text {
                None => b.append_null(),
                Some(t) => {
                    self.write_pseudonym(t, &mut buf);
                    let s = std::str::from_utf8(&buf)
                        .map_err(|_| Error::Internal("pseudonym is not ASCII".into()))?;
                    b.append_value(s);
                }
            }
            Ok(())
        };
        match a.data_type() {
            DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32 => {
                let ints = arrow::compute::cast(a, &DataType::Int64)?;
                let ints = ints.as_primitive::<Int64Type>();
                let mut digits = [0u8; 20];
                for i in 0..n {
                    if ints.is_null(i) {
                        push(&mut b, None)?;
                    } else {
                        let len = decimal(ints.value(i), &mut digits);
                        push(&mut b, Some(&digits[20 - len..]))?;
                    }
                }
            }
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                let s = arrow::compute::cast(a, &DataType::Utf8)?;
                let s = s.as_string::<i32>();
                for i in 0..n {
                    push(&mut b, s.is_valid(i).then(|| s.value(i).as_bytes()))?;
                }
            }
            _ => {
                let s = arrow::compute::cast(a, &DataType::Utf8)?;
                let s = s.as_string::<i32>();
                for i in 0..n {
                    push(&mut b, s.is_valid(i).then(|| s.value(i).as_bytes()))?;
                }
            }
        }
        Ok(Arc::new(b.finish()))
    }
}

/// Writes `v` in decimal at the end of `out`; returns how many bytes it used.
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
        let provider =
            IcebergStaticTableProvider::try_new_from_table(ws.warehouse.iceberg_table(&table)?)
                .await?;
        out.insert(name.to_string(), Arc::new(provider));
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
        Ok(Enforcer {
            ws: ws.clone(),
            gov,
            policy,
            tables,
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
        for (t, a) in &grants {
            let raw = self
                .tables
                .get(t)
                .ok_or_else(|| Error::Internal(format!("no provider for {t}")))?;
            scans.insert(Arc::as_ptr(raw) as *const () as usize);
            let (ns, name) = t
                .rsplit_once('.')
                .ok_or_else(|| Error::Internal(format!("`{t}` is not ns.table")))?;
            let view = view_plan(t, raw.clone(), a, r.attributes, udf.as_ref())?;
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
            audit: AuditLog::in_state(&self.ws.config.paths.state),
            clock: self.ws.clock.clone(),
        })
    }
}

fn column_names(s: &ArrowSchema) -> Vec<String> {
    s.fields().iter().map(|f| f.name().clone()).collect()
}

/// The view of one table: `Projection(masks) <- Filter(row filter) <- TableScan(raw)`.
fn view_plan(
    table: &str,
    raw: Arc<dyn TableProvider>,
    access: &TableAccess,
    attributes: &BTreeMap<String, String>,
    udf: Option<&Arc<ScalarUDF>>,
) -> Result<LogicalPlan> {
    let tref = TableReference::from(table);
    let schema = raw.schema();
    let mut b = LogicalPlanBuilder::scan(tref.clone(), provider_as_source(raw), None)?;
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
    audit: AuditLog,
    clock: Arc<dyn crate::clock::Clock>,
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
        let rules: Vec<String> = tables
            .iter()
            .filter_map(|t| self.grants.get(t))
            .flat_map(TableAccess::rules)
            .collect();
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
        let df = self.ctx.execute_logical_plan(plan).await?;
        let schema: SchemaRef = Arc::new(df.schema().as_arrow().clone());
        let batches = df.collect().await?;
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
        let u = udf();
        let mut m =
            <Hmac<Sha256> as KeyInit>::new_from_slice(b"0123456789abcdef0123456789abcdef").unwrap();
        m.update(b"3590");
        let full = hex::encode(m.finalize().into_bytes());
        assert_eq!(u.pseudonym(b"3590"), full[..16]);
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
    fn decimals() {
        let mut buf = [0u8; 20];
        for v in [0i64, 7, -7, 3590, i64::MAX, i64::MIN] {
            let n = decimal(v, &mut buf);
            assert_eq!(std::str::from_utf8(&buf[20 - n..]).unwrap(), v.to_string());
        }
    }

    #[test]
    fn debug_hides_the_key() {
        let u = udf();
        assert_eq!(format!("{u:?}"), "PseudonymUdf(<key redacted>)");
        let f = ScalarUDF::new_from_impl(udf());
        assert!(!format!("{f:?}").contains("0123456789abcdef"));
    }
}
