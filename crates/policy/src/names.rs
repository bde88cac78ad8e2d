//! The traits of a type whose values go by fixed names (an enum with `ALL` and `name()`):
//! written by name, and read back by it.

/// `by_name!(Type)` implements `Display` for `Type` by its `name()`; `by_name!(Type,
/// Unknown)` also implements `FromStr` reading any of `Type::ALL` by its name, and refusing
/// any other name with `PolicyError::Unknown`.
macro_rules! by_name {
    ($ty:ident) => {
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
    ($ty:ident, $unknown:ident) => {
        by_name!($ty);

        impl std::str::FromStr for $ty {
            type Err = $crate::PolicyError;

            #[doc = concat!("Reads a [`", stringify!($ty), "`] by its [`name`](", stringify!($ty), "::name).")]
            fn from_str(name: &str) -> Result<$ty, $crate::PolicyError> {
                $ty::ALL
                    .into_iter()
                    .find(|value| value.name() == name)
                    .ok_or_else(|| $crate::PolicyError::$unknown {
                        name: name.to_string(),
                    })
            }
        }
    };
}

/// Names as an error lists the choices: `a, b or c`.
pub(crate) fn one_of(names: &[&str]) -> String {
    listed(names, "or")
}

/// Names joined as a sentence lists them: `a, b and c`.
pub(crate) fn all_of(names: &[&str]) -> String {
    listed(names, "and")
}

fn listed(names: &[&str], conjunction: &str) -> String {
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => {
            format!("{} {conjunction} {last}", rest.join(", "))
        }
        Some((last, _)) => last.to_string(),
        None => String::new(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::fmt::{Debug, Display};
    use std::str::FromStr;

    use serde::Serialize;

    /// Asserts that `value` is written by its name and reads back from it, in text and in
    /// JSON alike.
    pub(crate) fn reads_back<T>(value: T)
    where
        T: Copy + Debug + Display + FromStr<Err: Debug + PartialEq> + PartialEq + Serialize,
    {
        assert_eq!(value.to_string().parse::<T>(), Ok(value));
        assert_eq!(
            serde_json::to_string(&value).unwrap(),
            format!("\"{value}\""),
            "serde writes the same name"
        );
    }
}
