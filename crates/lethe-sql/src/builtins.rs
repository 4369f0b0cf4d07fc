//! Which functions count as DataFusion built-ins.
//!
//! A function is built-in when DataFusion's default registries hold a function with the
//! same name *and* the same implementation type. Comparing the type as well as the name
//! means a user function registered under a built-in's name (say a custom `abs`) is still
//! treated as user-defined, hence opaque. Everything not recognised here is opaque to
//! lineage: its output may or may not carry its inputs' values.
//!
//! Not covered: built-ins that a build of DataFusion with non-default features registers
//! beyond these registries; such functions are reported as opaque (the safe side).

use std::any::{Any, TypeId};
use std::collections::HashSet;
use std::sync::OnceLock;

use datafusion::logical_expr::{AggregateUDF, ScalarUDF, WindowUDF};

/// Name and implementation type of every default function, per kind.
struct Registry {
    scalar: HashSet<(String, TypeId)>,
    aggregate: HashSet<(String, TypeId)>,
    window: HashSet<(String, TypeId)>,
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut scalar: HashSet<(String, TypeId)> = datafusion::functions::all_default_functions()
            .iter()
            .map(|f| scalar_key(f))
            .collect();
        scalar.extend(
            datafusion::functions_nested::all_default_nested_functions()
                .iter()
                .map(|f| scalar_key(f)),
        );
        let aggregate = datafusion::functions_aggregate::all_default_aggregate_functions()
            .iter()
            .map(|f| aggregate_key(f))
            .collect();
        let window = datafusion::functions_window::all_default_window_functions()
            .iter()
            .map(|f| window_key(f))
            .collect();
        Registry {
            scalar,
            aggregate,
            window,
        }
    })
}

fn type_of(any: &dyn Any) -> TypeId {
    // Dispatches through the vtable: the concrete implementation's type, not `&dyn Any`'s.
    Any::type_id(any)
}

fn scalar_key(f: &ScalarUDF) -> (String, TypeId) {
    (f.name().to_owned(), type_of(f.inner().as_any()))
}

fn aggregate_key(f: &AggregateUDF) -> (String, TypeId) {
    (f.name().to_owned(), type_of(f.inner().as_any()))
}

fn window_key(f: &WindowUDF) -> (String, TypeId) {
    (f.name().to_owned(), type_of(f.inner().as_any()))
}

/// True when `f` is one of DataFusion's default scalar functions (including nested/array ones).
pub(crate) fn is_builtin_scalar(f: &ScalarUDF) -> bool {
    registry().scalar.contains(&scalar_key(f))
}

/// True when `f` is one of DataFusion's default aggregate functions.
pub(crate) fn is_builtin_aggregate(f: &AggregateUDF) -> bool {
    registry().aggregate.contains(&aggregate_key(f))
}

/// True when `f` is one of DataFusion's default window functions.
pub(crate) fn is_builtin_window(f: &WindowUDF) -> bool {
    registry().window.contains(&window_key(f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::DataType;
    use datafusion::logical_expr::{ColumnarValue, Volatility, create_udf};
    use std::sync::Arc;

    #[test]
    fn default_functions_are_builtin() {
        let upper = datafusion::functions::all_default_functions()
            .into_iter()
            .find(|f| f.name() == "upper");
        assert!(upper.is_some_and(|f| is_builtin_scalar(&f)));
        let array_length = datafusion::functions_nested::all_default_nested_functions()
            .into_iter()
            .find(|f| f.name() == "array_length");
        assert!(array_length.is_some_and(|f| is_builtin_scalar(&f)));
        let count = datafusion::functions_aggregate::all_default_aggregate_functions()
            .into_iter()
            .find(|f| f.name() == "count");
        assert!(count.is_some_and(|f| is_builtin_aggregate(&f)));
        let row_number = datafusion::functions_window::all_default_window_functions()
            .into_iter()
            .find(|f| f.name() == "row_number");
        assert!(row_number.is_some_and(|f| is_builtin_window(&f)));
    }

    #[test]
    fn user_function_shadowing_a_builtin_name_is_not_builtin() {
        let fake_upper = create_udf(
            "upper",
            vec![DataType::Utf8],
            DataType::Utf8,
            Volatility::Immutable,
            Arc::new(|args: &[ColumnarValue]| Ok(args[0].clone())),
        );
        assert!(!is_builtin_scalar(&fake_upper));
    }
}
