//! Nested fields: paths to struct fields, list elements and map keys and values, resolved by
//! Iceberg field id, and the Arrow arrays at those paths.
//!
//! A path is written as Iceberg names fields: dots between struct fields (`contact.email`),
//! `element` for a list's elements (`addresses.element.street`), `key` and `value` for a map's
//! keys and values (`attributes.value`). Short names that leave out `element` (as Iceberg Java
//! and the iceberg crate accept: `addresses.street`) resolve too. A path is resolved to the
//! field ids from its top-level column down, so a field renamed since is found by its id.
//!
//! On Arrow batches in a table's current schema (what [`crate::read`] returns) this module:
//! - reads the values at a path with the row each belongs to ([`leaf`]; every element of a
//!   list, every value of a map; none under a null parent);
//! - sets the values at a path to null in chosen rows, keeping the rest of each row
//!   ([`set_null`]: a struct field, a list element's field, map values);
//! - projects a nested array read from a file into the current type by field id
//!   ([`project_array`]), so nested renames, added and dropped fields read right.
//!
//! Only `List` and `Map` Arrow arrays are handled inside paths (what the iceberg crate's Arrow
//! schema has); other list layouts are an error naming the path.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, ListArray, MapArray, StructArray, make_array,
    new_null_array,
};
use arrow::buffer::NullBuffer;
use arrow::compute;
use arrow::datatypes::{DataType, Field};
use iceberg::spec::{NestedFieldRef, Schema, Type};

use crate::error::{Error, Result};

/// One step below a top-level column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The struct's field at this position.
    Field(usize),
    /// A list's elements.
    Element,
    /// A map's keys.
    Key,
    /// A map's values.
    Value,
}

/// A field of a schema, reached from its top-level column.
#[derive(Debug, Clone)]
pub struct FieldPath {
    /// Its full dotted name (`addresses.element.street`).
    pub name: String,
    /// The position of its top-level column in the schema.
    pub column: usize,
    /// The steps below the top-level column (empty for a top-level column).
    pub steps: Vec<Step>,
    /// The field ids from the top-level column down to the field.
    pub ids: Vec<i32>,
    /// The field.
    pub field: NestedFieldRef,
    /// Whether it is inside a list or a map (a row holds any number of its values).
    pub repeated: bool,
    /// Whether it is a map's key (keys can't be null).
    pub map_key: bool,
}

impl FieldPath {
    /// Its field id.
    pub fn id(&self) -> i32 {
        self.field.id
    }

    /// Whether it is a primitive field (a leaf).
    pub fn is_leaf(&self) -> bool {
        matches!(self.field.field_type.as_ref(), Type::Primitive(_))
    }

    /// Whether it is reached through struct fields only (a value per row at most).
    pub fn through_structs_only(&self) -> bool {
        !self.repeated
    }

    /// Whether the path lies under `other` (or is it).
    pub fn is_under(&self, other: &FieldPath) -> bool {
        self.ids.starts_with(&other.ids)
    }
}

/// Every field of `schema` (top-level columns, struct fields, list elements, map keys and
/// values), depth first in schema order.
pub fn field_paths(schema: &Schema) -> Vec<FieldPath> {
    struct Walk {
        out: Vec<FieldPath>,
    }
    impl Walk {
        fn visit(&mut self, path: FieldPath) {
            let ty = path.field.field_type.clone();
            self.out.push(path.clone());
            match ty.as_ref() {
                Type::Primitive(_) => {}
                Type::Struct(s) => {
                    for (k, f) in s.fields().iter().enumerate() {
                        self.visit(path.child(f, Step::Field(k), &f.name));
                    }
                }
                Type::List(l) => {
                    let mut p = path.child(&l.element_field, Step::Element, "element");
                    p.repeated = true;
                    self.visit(p);
                }
                Type::Map(m) => {
                    let mut k = path.child(&m.key_field, Step::Key, "key");
                    k.repeated = true;
                    k.map_key = true;
                    self.visit(k);
                    let mut v = path.child(&m.value_field, Step::Value, "value");
                    v.repeated = true;
                    self.visit(v);
                }
            }
        }
    }
    let mut w = Walk { out: Vec::new() };
    for (i, f) in schema.as_struct().fields().iter().enumerate() {
        w.visit(FieldPath {
            name: f.name.clone(),
            column: i,
            steps: Vec::new(),
            ids: vec![f.id],
            field: f.clone(),
            repeated: false,
            map_key: false,
        });
    }
    w.out
}

impl FieldPath {
    fn child(&self, f: &NestedFieldRef, step: Step, name: &str) -> FieldPath {
        let mut steps = self.steps.clone();
        steps.push(step);
        let mut ids = self.ids.clone();
        ids.push(f.id);
        FieldPath {
            name: format!("{}.{name}", self.name),
            column: self.column,
            steps,
            ids,
            field: f.clone(),
            repeated: self.repeated,
            map_key: false,
        }
    }
}

/// The field `path` names in `schema` (its full name, or a short name without `element`); an
/// error naming the nearest existing path otherwise.
pub fn resolve(schema: &Schema, path: &str) -> Result<FieldPath> {
    let all = field_paths(schema);
    if let Some(p) = all.iter().find(|p| p.name == path) {
        return Ok(p.clone());
    }
    if let Some(f) = schema.field_by_name(path)
        && let Some(p) = all.iter().find(|p| p.id() == f.id)
    {
        return Ok(p.clone());
    }
    Err(Error::invalid(match nearest_in(&all, path) {
        Some(n) => format!("no field `{path}` (the nearest is `{n}`)"),
        None => format!("no field `{path}` (the table has no columns)"),
    }))
}

/// The existing path nearest to `path` (edit distance, ties to the shorter name), for error
/// messages.
pub fn nearest(schema: &Schema, path: &str) -> Option<String> {
    nearest_in(&field_paths(schema), path)
}

fn nearest_in(all: &[FieldPath], path: &str) -> Option<String> {
    nearest_name(all.iter().map(|p| p.name.as_str()), path)
}

/// The name among `names` nearest to `path` (edit distance, ties to the shorter name), for
/// error messages.
pub fn nearest_name<'a>(names: impl Iterator<Item = &'a str>, path: &str) -> Option<String> {
    names
        .map(|n| (strsim::levenshtein(n, path), n.len(), n))
        .min()
        .map(|(_, _, n)| n.to_string())
}

/// A type as Iceberg writes it for people: `struct<email: string, phone: string>`,
/// `list<struct<street: string, city: string>>`, `map<string, string>`.
pub fn type_name(t: &Type) -> String {
    match t {
        Type::Primitive(p) => p.to_string(),
        Type::Struct(s) => format!(
            "struct<{}>",
            s.fields()
                .iter()
                .map(|f| format!("{}: {}", f.name, type_name(&f.field_type)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Type::List(l) => format!("list<{}>", type_name(&l.element_field.field_type)),
        Type::Map(m) => format!(
            "map<{}, {}>",
            type_name(&m.key_field.field_type),
            type_name(&m.value_field.field_type)
        ),
    }
}

/// The values at a path of one column, with the row each belongs to.
#[derive(Debug, Clone)]
pub struct Leaf {
    /// The values (the child array at the path; may hold more slots than are reached).
    pub values: ArrayRef,
    /// For each slot of `values`, the row of the column it belongs to; None when it belongs to
    /// no row (under a null parent, or outside every list).
    pub owner: Vec<Option<usize>>,
}

impl Leaf {
    /// Non-null values reached, as (row, slot).
    pub fn present(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.owner
            .iter()
            .enumerate()
            .filter_map(|(i, o)| o.filter(|_| self.values.is_valid(i)).map(|r| (r, i)))
    }

    /// The non-null values of each row as text (numbers and dates in Arrow's text form), for
    /// `rows` rows.
    pub fn texts_by_row(&self, rows: usize) -> Result<Vec<Vec<String>>> {
        let mut out = vec![Vec::new(); rows];
        if !self.values.data_type().is_primitive()
            && !matches!(
                self.values.data_type(),
                DataType::Utf8
                    | DataType::LargeUtf8
                    | DataType::Utf8View
                    | DataType::Boolean
                    | DataType::Binary
                    | DataType::LargeBinary
                    | DataType::FixedSizeBinary(_)
            )
        {
            return Err(Error::invalid(format!(
                "values of type {} can't be read as text",
                self.values.data_type()
            )));
        }
        let text = compute::cast(&self.values, &DataType::Utf8)?;
        let s = text.as_string::<i32>();
        for (row, slot) in self.present() {
            if s.is_valid(slot) {
                out[row].push(s.value(slot).to_string());
            }
        }
        Ok(out)
    }
}

fn unsupported(what: &DataType) -> Error {
    Error::invalid(format!(
        "nested values in an Arrow {what} array can't be read by path (lists and maps only)"
    ))
}

/// The values at `steps` below `column` (an array of a top-level column), with their rows.
pub fn leaf(column: &ArrayRef, steps: &[Step]) -> Result<Leaf> {
    let mut cur = column.clone();
    let mut owner: Vec<Option<usize>> = (0..cur.len())
        .map(|i| cur.is_valid(i).then_some(i))
        .collect();
    for step in steps {
        match step {
            Step::Field(k) => {
                let s = cur
                    .as_struct_opt()
                    .ok_or_else(|| unsupported(cur.data_type()))?;
                let child = s
                    .columns()
                    .get(*k)
                    .ok_or_else(|| Error::Internal(format!("struct has no field {k}")))?
                    .clone();
                for (i, o) in owner.iter_mut().enumerate() {
                    if s.is_null(i) {
                        *o = None;
                    }
                }
                cur = child;
            }
            Step::Element => {
                let l = cur
                    .as_list_opt::<i32>()
                    .ok_or_else(|| unsupported(cur.data_type()))?;
                let values = l.values().clone();
                let mut next = vec![None; values.len()];
                let offsets = l.value_offsets();
                for (i, o) in owner.iter().enumerate() {
                    if let Some(r) = o
                        && l.is_valid(i)
                    {
                        for slot in next
                            .iter_mut()
                            .take(offsets[i + 1] as usize)
                            .skip(offsets[i] as usize)
                        {
                            *slot = Some(*r);
                        }
                    }
                }
                owner = next;
                cur = values;
            }
            Step::Key | Step::Value => {
                let m = cur
                    .as_map_opt()
                    .ok_or_else(|| unsupported(cur.data_type()))?;
                let values = if *step == Step::Key {
                    m.keys().clone()
                } else {
                    m.values().clone()
                };
                let mut next = vec![None; values.len()];
                let offsets = m.value_offsets();
                for (i, o) in owner.iter().enumerate() {
                    if let Some(r) = o
                        && m.is_valid(i)
                    {
                        for slot in next
                            .iter_mut()
                            .take(offsets[i + 1] as usize)
                            .skip(offsets[i] as usize)
                        {
                            *slot = Some(*r);
                        }
                    }
                }
                owner = next;
                cur = values;
            }
        }
    }
    Ok(Leaf { values: cur, owner })
}

/// The array of a struct path (`contact.email`) of a batch whose columns are named as the
/// schema's, with the nulls of its parents: None when `path` names no struct field.
pub fn struct_field(batch: &arrow::array::RecordBatch, path: &str) -> Option<ArrayRef> {
    let mut parts = path.split('.');
    let mut cur = batch.column_by_name(parts.next()?)?.clone();
    let mut nulls: Option<NullBuffer> = cur.nulls().cloned();
    for part in parts {
        let s = cur.as_struct_opt()?;
        let (k, _) = s.fields().find(part)?;
        cur = s.column(k).clone();
        nulls = NullBuffer::union(nulls.as_ref(), cur.nulls());
    }
    if nulls.as_ref() == cur.nulls() {
        return Some(cur);
    }
    let data = cur.to_data().into_builder().nulls(nulls).build().ok()?;
    Some(make_array(data))
}

/// Sets the values at `steps` below `column` to null in the rows `rows` selects, keeping the
/// rest of each row; returns the new array and, per row, whether a value was nulled.
pub fn set_null(
    column: &ArrayRef,
    steps: &[Step],
    rows: &BooleanArray,
) -> Result<(ArrayRef, BooleanArray)> {
    let l = leaf(column, steps)?;
    let mut changed = vec![false; column.len()];
    for (row, _) in l.present() {
        if rows.is_valid(row) && rows.value(row) {
            changed[row] = true;
        }
    }
    if !changed.iter().any(|c| *c) {
        return Ok((column.clone(), BooleanArray::from(changed)));
    }
    let out = null_in(column, steps, &changed)?;
    Ok((out, BooleanArray::from(changed)))
}

fn null_in(a: &ArrayRef, steps: &[Step], mask: &[bool]) -> Result<ArrayRef> {
    let Some((step, rest)) = steps.split_first() else {
        let m = BooleanArray::from(mask.to_vec());
        let nulls = new_null_array(a.data_type(), a.len());
        return Ok(compute::kernels::zip::zip(&m, &nulls, a)?);
    };
    let spread = |offsets: &[i32], n: usize| -> Vec<bool> {
        let mut out = vec![false; n];
        for (i, m) in mask.iter().enumerate() {
            if *m {
                for slot in out
                    .iter_mut()
                    .take(offsets[i + 1] as usize)
                    .skip(offsets[i] as usize)
                {
                    *slot = true;
                }
            }
        }
        out
    };
    Ok(match step {
        Step::Field(k) => {
            let s = a
                .as_struct_opt()
                .ok_or_else(|| unsupported(a.data_type()))?;
            let mut cols = s.columns().to_vec();
            cols[*k] = null_in(&cols[*k], rest, mask)?;
            if rest.is_empty() && !s.fields()[*k].is_nullable() {
                return Err(Error::invalid(format!(
                    "field `{}` is required and can't be set to null",
                    s.fields()[*k].name()
                )));
            }
            Arc::new(StructArray::try_new(
                s.fields().clone(),
                cols,
                s.nulls().cloned(),
            )?)
        }
        Step::Element => {
            let l = a
                .as_list_opt::<i32>()
                .ok_or_else(|| unsupported(a.data_type()))?;
            let DataType::List(field) = a.data_type() else {
                return Err(unsupported(a.data_type()));
            };
            if rest.is_empty() && !field.is_nullable() {
                return Err(Error::invalid(
                    "the list's elements are required and can't be set to null",
                ));
            }
            let inner = spread(l.value_offsets(), l.values().len());
            let values = null_in(l.values(), rest, &inner)?;
            Arc::new(ListArray::try_new(
                field.clone(),
                l.offsets().clone(),
                values,
                l.nulls().cloned(),
            )?)
        }
        Step::Key => {
            return Err(Error::invalid("a map's keys can't be set to null"));
        }
        Step::Value => {
            let m = a.as_map_opt().ok_or_else(|| unsupported(a.data_type()))?;
            let DataType::Map(field, ordered) = a.data_type() else {
                return Err(unsupported(a.data_type()));
            };
            let entries = m.entries();
            if rest.is_empty() && !entries.fields()[1].is_nullable() {
                return Err(Error::invalid(
                    "the map's values are required and can't be set to null",
                ));
            }
            let inner = spread(m.value_offsets(), m.values().len());
            let values = null_in(m.values(), rest, &inner)?;
            let entries = StructArray::try_new(
                entries.fields().clone(),
                vec![m.keys().clone(), values],
                entries.nulls().cloned(),
            )?;
            Arc::new(MapArray::try_new(
                field.clone(),
                m.offsets().clone(),
                entries,
                m.nulls().cloned(),
                *ordered,
            )?)
        }
    })
}

const FIELD_ID_KEY: &str = "PARQUET:field_id";

fn id_of(f: &Field) -> Option<i32> {
    f.metadata().get(FIELD_ID_KEY).and_then(|v| v.parse().ok())
}

/// Projects an array read from a file into `to` (its field in the current schema): struct fields are matched by field id (by name when the file has no
/// ids), fields the file lacks read as null, fields the current schema dropped are left out;
/// primitive values are cast (type promotion).
pub fn project_array(a: &ArrayRef, to: &Field) -> Result<ArrayRef> {
    if a.data_type() == to.data_type() {
        return Ok(a.clone());
    }
    match (a.data_type(), to.data_type()) {
        (DataType::Struct(src), DataType::Struct(dst)) => {
            let s = a.as_struct();
            let by_id = src.iter().any(|f| id_of(f).is_some());
            let mut cols = Vec::with_capacity(dst.len());
            for d in dst.iter() {
                let pos = src.iter().position(|f| {
                    if by_id {
                        id_of(f).is_some() && id_of(f) == id_of(d)
                    } else {
                        f.name() == d.name()
                    }
                });
                cols.push(match pos {
                    Some(p) => project_array(s.column(p), d)?,
                    None => new_null_array(d.data_type(), s.len()),
                });
            }
            Ok(Arc::new(StructArray::try_new(
                dst.clone(),
                cols,
                s.nulls().cloned(),
            )?))
        }
        (DataType::List(_), DataType::List(dst)) => {
            let l = a.as_list::<i32>();
            let values = project_array(l.values(), dst)?;
            Ok(Arc::new(ListArray::try_new(
                dst.clone(),
                l.offsets().clone(),
                values,
                l.nulls().cloned(),
            )?))
        }
        (DataType::Map(_, _), DataType::Map(dst, ordered)) => {
            let m = a.as_map();
            let entries: ArrayRef = Arc::new(m.entries().clone());
            let projected = project_array(&entries, dst)?;
            Ok(Arc::new(MapArray::try_new(
                dst.clone(),
                m.offsets().clone(),
                projected.as_struct().clone(),
                m.nulls().cloned(),
                *ordered,
            )?))
        }
        _ => Ok(compute::cast(a, to.data_type())?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, MapBuilder, StringArray, StringBuilder};
    use arrow::buffer::OffsetBuffer;
    use iceberg::spec::{ListType, MapType, NestedField, PrimitiveType, StructType};

    fn schema() -> Schema {
        let s = |id, n: &str| {
            Arc::new(NestedField::optional(
                id,
                n,
                Type::Primitive(PrimitiveType::String),
            ))
        };
        Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::optional(
                    2,
                    "contact",
                    Type::Struct(StructType::new(vec![s(5, "email"), s(6, "phone")])),
                )
                .into(),
                NestedField::optional(
                    3,
                    "addresses",
                    Type::List(ListType::new(Arc::new(NestedField::list_element(
                        7,
                        Type::Struct(StructType::new(vec![s(8, "street"), s(9, "city")])),
                        false,
                    )))),
                )
                .into(),
                NestedField::optional(
                    4,
                    "attributes",
                    Type::Map(MapType::new(
                        Arc::new(NestedField::map_key_element(
                            10,
                            Type::Primitive(PrimitiveType::String),
                        )),
                        Arc::new(NestedField::map_value_element(
                            11,
                            Type::Primitive(PrimitiveType::String),
                            false,
                        )),
                    )),
                )
                .into(),
            ])
            .build()
            .unwrap()
    }

    #[test]
    fn paths_resolve_by_full_and_short_names_and_misspellings_name_the_nearest() {
        let s = schema();
        let names: Vec<String> = field_paths(&s).into_iter().map(|p| p.name).collect();
        assert_eq!(
            names,
            vec![
                "id",
                "contact",
                "contact.email",
                "contact.phone",
                "addresses",
                "addresses.element",
                "addresses.element.street",
                "addresses.element.city",
                "attributes",
                "attributes.key",
                "attributes.value",
            ]
        );
        let p = resolve(&s, "addresses.element.street").unwrap();
        assert_eq!((p.id(), p.repeated, p.column), (8, true, 2));
        assert_eq!(p.steps, vec![Step::Element, Step::Field(0)]);
        assert_eq!(resolve(&s, "addresses.street").unwrap().id(), 8);
        assert_eq!(resolve(&s, "contact.email").unwrap().ids, vec![2, 5]);
        let e = resolve(&s, "contact.emial").unwrap_err().to_string();
        assert!(e.contains("the nearest is `contact.email`"), "{e}");
        let e = resolve(&s, "addresses.element.stret")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`addresses.element.street`"), "{e}");
        assert_eq!(
            type_name(&s.as_struct().fields()[1].field_type),
            "struct<email: string, phone: string>"
        );
        assert_eq!(
            type_name(&s.as_struct().fields()[2].field_type),
            "list<struct<street: string, city: string>>"
        );
        assert_eq!(
            type_name(&s.as_struct().fields()[3].field_type),
            "map<string, string>"
        );
    }

    fn batch() -> arrow::array::RecordBatch {
        let target = crate::writer::arrow_schema(&schema()).unwrap();
        let DataType::Struct(contact_fields) = target.field(1).data_type().clone() else {
            panic!()
        };
        let contact = StructArray::try_new(
            contact_fields,
            vec![
                Arc::new(StringArray::from(vec![
                    Some("a@x"),
                    Some("b@x"),
                    Some("c@x"),
                ])),
                Arc::new(StringArray::from(vec![Some("1"), None, Some("3")])),
            ],
            Some(NullBuffer::from(vec![true, true, false])),
        )
        .unwrap();
        let DataType::List(el) = target.field(2).data_type().clone() else {
            panic!()
        };
        let DataType::Struct(addr_fields) = el.data_type().clone() else {
            panic!()
        };
        let addr = StructArray::try_new(
            addr_fields,
            vec![
                Arc::new(StringArray::from(vec!["s1", "s2", "s3"])),
                Arc::new(StringArray::from(vec!["c1", "c2", "c3"])),
            ],
            None,
        )
        .unwrap();
        // Row 0: two addresses, row 1: none, row 2: one.
        let addresses = ListArray::try_new(
            el,
            OffsetBuffer::new(vec![0, 2, 2, 3].into()),
            Arc::new(addr),
            None,
        )
        .unwrap();
        let DataType::Map(entries, _) = target.field(3).data_type().clone() else {
            panic!()
        };
        let DataType::Struct(kv) = entries.data_type().clone() else {
            panic!()
        };
        let mut mb = MapBuilder::new(
            Some(arrow::array::MapFieldNames {
                entry: entries.name().clone(),
                key: kv[0].name().clone(),
                value: kv[1].name().clone(),
            }),
            StringBuilder::new(),
            StringBuilder::new(),
        )
        .with_keys_field(kv[0].clone())
        .with_values_field(kv[1].clone());
        mb.keys().append_value("nhs");
        mb.values().append_value("943 476 5919");
        mb.append(true).unwrap();
        mb.append(false).unwrap();
        mb.keys().append_value("kin");
        mb.values().append_value("Jo");
        mb.keys().append_value("pet");
        mb.values().append_null();
        mb.append(true).unwrap();
        let attributes = mb.finish();
        arrow::array::RecordBatch::try_new(
            target,
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 3])),
                Arc::new(contact),
                Arc::new(addresses),
                Arc::new(attributes),
            ],
        )
        .unwrap()
    }

    #[test]
    fn values_by_row_follow_structs_lists_and_maps() {
        let s = schema();
        let b = batch();
        let at = |path: &str| {
            let p = resolve(&s, path).unwrap();
            leaf(b.column(p.column), &p.steps)
                .unwrap()
                .texts_by_row(b.num_rows())
                .unwrap()
        };
        // The third contact is null: its email is not reached.
        assert_eq!(at("contact.email"), vec![vec!["a@x"], vec!["b@x"], vec![]]);
        assert_eq!(
            at("addresses.element.street"),
            vec![vec!["s1", "s2"], vec![], vec!["s3"]]
        );
        assert_eq!(
            at("attributes.value"),
            vec![vec!["943 476 5919"], vec![], vec!["Jo"]]
        );
        assert_eq!(
            struct_field(&b, "contact.email")
                .unwrap()
                .as_string::<i32>()
                .iter()
                .collect::<Vec<_>>(),
            vec![Some("a@x"), Some("b@x"), None]
        );
    }

    #[test]
    fn predicates_select_rows_by_a_struct_field() {
        use crate::predicate::{Predicate, Value};
        let s = schema();
        let b = batch();
        // The third contact is null: its email (stored "c@x") is not selected.
        let p = Predicate::is_in(
            "contact.email",
            vec![Value::Str("a@x".into()), Value::Str("c@x".into())],
        );
        p.check(&s, "t").unwrap();
        assert_eq!(
            p.evaluate(&b).unwrap().iter().collect::<Vec<_>>(),
            vec![Some(true), Some(false), Some(false)]
        );
        let e = Predicate::is_in("addresses.element.street", vec![Value::Str("s1".into())])
            .check(&s, "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("inside a list or a map"), "{e}");
    }

    #[test]
    fn set_null_keeps_the_rest_of_the_row() {
        let s = schema();
        let b = batch();
        let rows = BooleanArray::from(vec![true, true, true]);
        for path in [
            "addresses.element.street",
            "attributes.value",
            "contact.phone",
        ] {
            let p = resolve(&s, path).unwrap();
            let (out, changed) = set_null(b.column(p.column), &p.steps, &rows).unwrap();
            let after = leaf(&out, &p.steps).unwrap();
            assert_eq!(after.present().count(), 0, "{path}");
            // The row still holds its other fields.
            assert_eq!(out.len(), 3);
            assert_eq!(out.null_count(), b.column(p.column).null_count(), "{path}");
            match path {
                "addresses.element.street" => {
                    assert_eq!(
                        changed.iter().collect::<Vec<_>>(),
                        vec![Some(true), Some(false), Some(true)]
                    );
                    let city = resolve(&s, "addresses.element.city").unwrap();
                    assert_eq!(
                        leaf(&out, &city.steps).unwrap().texts_by_row(3).unwrap(),
                        vec![vec!["c1", "c2"], vec![], vec!["c3"]]
                    );
                }
                "attributes.value" => {
                    let k = resolve(&s, "attributes.key").unwrap();
                    assert_eq!(
                        leaf(&out, &k.steps).unwrap().texts_by_row(3).unwrap(),
                        vec![vec!["nhs"], vec![], vec!["kin", "pet"]]
                    );
                }
                _ => {
                    let e = resolve(&s, "contact.email").unwrap();
                    assert_eq!(
                        leaf(&out, &e.steps).unwrap().texts_by_row(3).unwrap(),
                        vec![vec!["a@x"], vec!["b@x"], vec![]]
                    );
                }
            }
        }
        // Only the rows selected change.
        let p = resolve(&s, "addresses.element.street").unwrap();
        let one = BooleanArray::from(vec![false, false, true]);
        let (out, _) = set_null(b.column(p.column), &p.steps, &one).unwrap();
        assert_eq!(
            leaf(&out, &p.steps).unwrap().texts_by_row(3).unwrap(),
            vec![vec!["s1", "s2"], vec![], vec![]]
        );
        let k = resolve(&s, "attributes.key").unwrap();
        assert!(set_null(b.column(k.column), &k.steps, &rows).is_err());
    }

    #[test]
    fn projection_matches_struct_fields_by_id_after_a_rename() {
        let b = batch();
        let contact = b.column(1);
        let target = b.schema().field(1).clone();
        // The file names the fields otherwise (written before a rename), same ids.
        let DataType::Struct(fields) = target.data_type().clone() else {
            panic!()
        };
        let renamed: Vec<Field> = fields
            .iter()
            .rev()
            .map(|f| f.as_ref().clone().with_name(format!("old_{}", f.name())))
            .collect();
        let s = contact.as_struct();
        let file_array: ArrayRef = Arc::new(
            StructArray::try_new(
                renamed.into(),
                vec![s.column(1).clone(), s.column(0).clone()],
                s.nulls().cloned(),
            )
            .unwrap(),
        );
        let out = project_array(&file_array, &target).unwrap();
        assert_eq!(out.data_type(), target.data_type());
        assert_eq!(out.as_struct().column(0).as_ref(), s.column(0).as_ref());
    }
}
