//! The canonical binary form the content digest and the version id hash, written straight
//! from a value's `Serialize` impl.
//!
//! The form is defined on the JSON value `serde_json::to_value` would make (see
//! [`crate::record`]'s digest docs): a tag byte per value, lengths as 8 little-endian
//! bytes, integers and floats by their 8 bytes (a non-negative integer as `u`, a negative one
//! as `i`, a float by its bits as `d`, a non-finite float as null), strings and arrays with
//! their lengths, objects with their non-null fields sorted by key. Building the JSON value
//! first costs an allocation per string and field; this serializer writes the same bytes
//! with one buffer per object, which the digest of every record read pays for
//! (`decode-lab observe` checks a million). A test holds it to the value-based form.

use std::fmt;

use serde::ser::{self, Serialize};

/// Why a value has no canonical form: a map key that is not a string or an integer (as
/// `serde_json::to_value` refuses), or a serializer's own message.
#[derive(Debug)]
pub struct CanonicalError(String);

impl fmt::Display for CanonicalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CanonicalError {}

impl ser::Error for CanonicalError {
    fn custom<T: fmt::Display>(msg: T) -> CanonicalError {
        CanonicalError(msg.to_string())
    }
}

/// The canonical bytes of `value`, appended to `out`.
pub fn write<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) -> Result<(), CanonicalError> {
    value.serialize(Canon(out)).map(|_| ())
}

/// Whether what was written is JSON's null (which an object leaves out).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Written {
    Null,
    Value,
}

struct Canon<'a>(&'a mut Vec<u8>);

fn length(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&(n as u64).to_le_bytes());
}

fn string(out: &mut Vec<u8>, s: &str) {
    out.push(b's');
    length(out, s.len());
    out.extend_from_slice(s.as_bytes());
}

impl Canon<'_> {
    fn unsigned(self, v: u64) -> Result<Written, CanonicalError> {
        self.0.push(b'u');
        self.0.extend_from_slice(&v.to_le_bytes());
        Ok(Written::Value)
    }

    fn signed(self, v: i64) -> Result<Written, CanonicalError> {
        if v >= 0 {
            return self.unsigned(v as u64);
        }
        self.0.push(b'i');
        self.0.extend_from_slice(&v.to_le_bytes());
        Ok(Written::Value)
    }

    fn null(self) -> Result<Written, CanonicalError> {
        self.0.push(b'n');
        Ok(Written::Null)
    }
}

/// An array: its tag and a length patched in at the end, its items written in place.
struct Seq<'a> {
    out: &'a mut Vec<u8>,
    /// Where the length goes.
    at: usize,
    count: usize,
    /// When the array is a tuple variant's, the object it is wrapped in, and where that begins.
    variant: Option<(&'static str, usize)>,
}

impl<'a> Seq<'a> {
    fn new(out: &'a mut Vec<u8>, variant: Option<&'static str>) -> Seq<'a> {
        let begin = out.len();
        out.push(b'a');
        let at = out.len();
        length(out, 0);
        Seq {
            out,
            at,
            count: 0,
            variant: variant.map(|v| (v, begin)),
        }
    }

    fn item<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), CanonicalError> {
        value.serialize(Canon(self.out))?;
        self.count += 1;
        Ok(())
    }

    fn end(self) -> Result<Written, CanonicalError> {
        self.out[self.at..self.at + 8].copy_from_slice(&(self.count as u64).to_le_bytes());
        if let Some((name, begin)) = self.variant {
            let body = self.out.split_off(begin);
            wrap(self.out, name, &body);
        }
        Ok(Written::Value)
    }
}

/// An object's key: a struct's field name, or a map's key as a string.
enum FieldKey {
    Static(&'static str),
    Owned(String),
}

impl FieldKey {
    fn as_str(&self) -> &str {
        match self {
            FieldKey::Static(s) => s,
            FieldKey::Owned(s) => s,
        }
    }
}

/// An object: its non-null fields' values written in place, in the order given, with their
/// keys and byte ranges; when it ends they are put in key order behind the tag and count.
/// `variant` wraps it as the only field of an outer object, as serde_json writes a struct
/// variant.
struct Object<'a> {
    out: &'a mut Vec<u8>,
    begin: usize,
    fields: Vec<(FieldKey, usize, usize)>,
    key: Option<String>,
    variant: Option<&'static str>,
}

impl<'a> Object<'a> {
    fn new(out: &'a mut Vec<u8>, variant: Option<&'static str>) -> Object<'a> {
        Object {
            begin: out.len(),
            out,
            fields: Vec::new(),
            key: None,
            variant,
        }
    }

    /// Keys are unique in what is hashed (struct fields; `BTreeMap` and JSON-object keys).
    fn field<T: Serialize + ?Sized>(
        &mut self,
        key: FieldKey,
        value: &T,
    ) -> Result<(), CanonicalError> {
        let start = self.out.len();
        if value.serialize(Canon(self.out))? == Written::Value {
            self.fields.push((key, start, self.out.len()));
        } else {
            self.out.truncate(start);
        }
        Ok(())
    }

    fn end(mut self) -> Result<Written, CanonicalError> {
        let values = self.out.split_off(self.begin);
        self.fields
            .sort_unstable_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        let body_start = self.out.len();
        self.out.push(b'o');
        length(self.out, self.fields.len());
        for (key, start, end) in &self.fields {
            string(self.out, key.as_str());
            self.out
                .extend_from_slice(&values[start - self.begin..end - self.begin]);
        }
        if let Some(name) = self.variant {
            let body = self.out.split_off(body_start);
            wrap(self.out, name, &body);
        }
        Ok(Written::Value)
    }
}

/// `{name: value}`, whose value's bytes are `body`.
fn wrap(out: &mut Vec<u8>, name: &str, body: &[u8]) {
    out.push(b'o');
    length(out, 1);
    string(out, name);
    out.extend_from_slice(body);
}

/// Serializer methods that widen a narrow integer to 64 bits and write it with `$write`.
macro_rules! widen {
    ($($method:ident($narrow:ty) => $write:ident),* $(,)?) => {
        $(fn $method(self, v: $narrow) -> Result<Written, CanonicalError> {
            self.$write(v.into())
        })*
    };
}

/// The key serializer's methods for what a key may be: written as its string.
macro_rules! written_as_string {
    ($($method:ident($value:ty)),* $(,)?) => {
        $(fn $method(self, v: $value) -> Result<String, CanonicalError> {
            Ok(v.to_string())
        })*
    };
}

/// The key serializer's methods for what a key may not be (see [`key_error`]).
macro_rules! refused {
    ($($method:ident($($arg:ty),*) -> $ok:ty),* $(,)?) => {
        $(fn $method(self, $(_: $arg),*) -> Result<$ok, CanonicalError> {
            Err(key_error())
        })*
    };
}

impl<'a> ser::Serializer for Canon<'a> {
    type Ok = Written;
    type Error = CanonicalError;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Seq<'a>;
    type SerializeTupleStruct = Seq<'a>;
    type SerializeTupleVariant = Seq<'a>;
    type SerializeMap = Object<'a>;
    type SerializeStruct = Object<'a>;
    type SerializeStructVariant = Object<'a>;

    fn serialize_bool(self, v: bool) -> Result<Written, CanonicalError> {
        self.0.push(if v { b't' } else { b'f' });
        Ok(Written::Value)
    }

    widen! {
        serialize_i8(i8) => signed,
        serialize_i16(i16) => signed,
        serialize_i32(i32) => signed,
        serialize_u8(u8) => unsigned,
        serialize_u16(u16) => unsigned,
        serialize_u32(u32) => unsigned,
    }

    fn serialize_i64(self, v: i64) -> Result<Written, CanonicalError> {
        self.signed(v)
    }

    fn serialize_u64(self, v: u64) -> Result<Written, CanonicalError> {
        self.unsigned(v)
    }

    fn serialize_f32(self, v: f32) -> Result<Written, CanonicalError> {
        self.serialize_f64(v.into())
    }

    fn serialize_f64(self, v: f64) -> Result<Written, CanonicalError> {
        if !v.is_finite() {
            return self.null();
        }
        self.0.push(b'd');
        self.0.extend_from_slice(&v.to_bits().to_le_bytes());
        Ok(Written::Value)
    }

    fn serialize_char(self, v: char) -> Result<Written, CanonicalError> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }

    fn serialize_str(self, v: &str) -> Result<Written, CanonicalError> {
        string(self.0, v);
        Ok(Written::Value)
    }

    fn serialize_bytes(self, v: &[u8]) -> Result<Written, CanonicalError> {
        self.0.push(b'a');
        length(self.0, v.len());
        for &b in v {
            self.0.push(b'u');
            self.0.extend_from_slice(&u64::from(b).to_le_bytes());
        }
        Ok(Written::Value)
    }

    fn serialize_none(self) -> Result<Written, CanonicalError> {
        self.null()
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Written, CanonicalError> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<Written, CanonicalError> {
        self.null()
    }

    fn serialize_unit_struct(self, _: &'static str) -> Result<Written, CanonicalError> {
        self.null()
    }

    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<Written, CanonicalError> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<Written, CanonicalError> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Written, CanonicalError> {
        let mut object = Object::new(self.0, None);
        object.field(FieldKey::Static(variant), value)?;
        object.end()
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Seq<'a>, CanonicalError> {
        Ok(Seq::new(self.0, None))
    }

    fn serialize_tuple(self, len: usize) -> Result<Seq<'a>, CanonicalError> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(
        self,
        _: &'static str,
        len: usize,
    ) -> Result<Seq<'a>, CanonicalError> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Seq<'a>, CanonicalError> {
        Ok(Seq::new(self.0, Some(variant)))
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Object<'a>, CanonicalError> {
        Ok(Object::new(self.0, None))
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Object<'a>, CanonicalError> {
        Ok(Object::new(self.0, None))
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Object<'a>, CanonicalError> {
        Ok(Object::new(self.0, Some(variant)))
    }
}

/// An array's four serde faces (a sequence, a tuple, a tuple struct, a tuple variant): each
/// adds an item with `$add` and ends the array.
macro_rules! array {
    ($($face:ident::$add:ident),* $(,)?) => {
        $(impl ser::$face for Seq<'_> {
            type Ok = Written;
            type Error = CanonicalError;

            fn $add<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), CanonicalError> {
                self.item(value)
            }

            fn end(self) -> Result<Written, CanonicalError> {
                Seq::end(self)
            }
        })*
    };
}

array!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field,
);

/// A map key as `serde_json::to_value` accepts one: a string, or an integer written as one.
struct Key;

impl ser::Serializer for Key {
    type Ok = String;
    type Error = CanonicalError;
    type SerializeSeq = ser::Impossible<String, CanonicalError>;
    type SerializeTuple = ser::Impossible<String, CanonicalError>;
    type SerializeTupleStruct = ser::Impossible<String, CanonicalError>;
    type SerializeTupleVariant = ser::Impossible<String, CanonicalError>;
    type SerializeMap = ser::Impossible<String, CanonicalError>;
    type SerializeStruct = ser::Impossible<String, CanonicalError>;
    type SerializeStructVariant = ser::Impossible<String, CanonicalError>;

    written_as_string! {
        serialize_str(&str),
        serialize_char(char),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        v: &'static str,
    ) -> Result<String, CanonicalError> {
        Ok(v.to_string())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<String, CanonicalError> {
        v.serialize(self)
    }
    refused! {
        serialize_bool(bool) -> String,
        serialize_f32(f32) -> String,
        serialize_f64(f64) -> String,
        serialize_bytes(&[u8]) -> String,
        serialize_none() -> String,
        serialize_unit() -> String,
        serialize_unit_struct(&'static str) -> String,
        serialize_seq(Option<usize>) -> Self::SerializeSeq,
        serialize_tuple(usize) -> Self::SerializeTuple,
        serialize_tuple_struct(&'static str, usize) -> Self::SerializeTupleStruct,
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Self::SerializeTupleVariant,
        serialize_map(Option<usize>) -> Self::SerializeMap,
        serialize_struct(&'static str, usize) -> Self::SerializeStruct,
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Self::SerializeStructVariant,
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<String, CanonicalError> {
        Err(key_error())
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<String, CanonicalError> {
        Err(key_error())
    }
}

fn key_error() -> CanonicalError {
    CanonicalError("a map key must be a string or an integer".into())
}

impl ser::SerializeMap for Object<'_> {
    type Ok = Written;
    type Error = CanonicalError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), CanonicalError> {
        self.key = Some(key.serialize(Key)?);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), CanonicalError> {
        let key = self
            .key
            .take()
            .ok_or_else(|| CanonicalError("a map value came before its key".into()))?;
        self.field(FieldKey::Owned(key), value)
    }

    fn end(self) -> Result<Written, CanonicalError> {
        Object::end(self)
    }
}

/// A struct's two serde faces (a struct, a struct variant): each field by its name.
macro_rules! object {
    ($($face:ident),* $(,)?) => {
        $(impl ser::$face for Object<'_> {
            type Ok = Written;
            type Error = CanonicalError;

            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), CanonicalError> {
                self.field(FieldKey::Static(key), value)
            }

            fn end(self) -> Result<Written, CanonicalError> {
                Object::end(self)
            }
        })*
    };
}

object!(SerializeStruct, SerializeStructVariant);

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use sha2::{Digest, Sha256};

    use super::*;
    use crate::record::hash_value;

    /// The value-based form of `value` and the canonical writer's, hashed.
    fn both<T: Serialize>(value: &T) -> (Vec<u8>, Vec<u8>) {
        let mut reference = Sha256::new();
        hash_value(&mut reference, &serde_json::to_value(value).unwrap());
        let mut bytes = Vec::new();
        write(value, &mut bytes).unwrap();
        (
            reference.finalize().to_vec(),
            Sha256::digest(&bytes).to_vec(),
        )
    }

    #[test]
    fn records_hash_as_their_json_values_do() {
        let text = include_str!("../tests/fixtures/records-before-backend-kind.jsonl");
        for record in crate::parse_records(text).unwrap() {
            let (reference, canonical) = both(&record);
            assert_eq!(reference, canonical);
            let (reference, canonical) = both(&crate::VersionKey::of(&record));
            assert_eq!(reference, canonical);
        }
    }

    fn json() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<u64>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>().prop_map(serde_json::Value::from),
            ".{0,6}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(3, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
                prop::collection::btree_map(".{0,4}", inner, 0..6)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Any JSON value: nulls inside objects left out, inside arrays kept; integers by
        /// sign; floats by their bits; keys sorted.
        #[test]
        fn any_json_value_hashes_as_the_reference(value in json()) {
            let (reference, canonical) = both(&value);
            prop_assert_eq!(reference, canonical);
        }
    }

    #[test]
    fn enums_and_options_take_their_json_shapes() {
        #[derive(serde::Serialize)]
        enum E {
            Unit,
            New(u32),
            Tuple(i8, f64),
            Struct { b: Option<u8>, a: &'static str },
        }
        #[derive(serde::Serialize)]
        struct S {
            e: Vec<E>,
            none: Option<u8>,
            some: Option<f64>,
            nan: f64,
            bytes: &'static [u8],
        }
        let s = S {
            e: vec![
                E::Unit,
                E::New(3),
                E::Tuple(-2, 0.5),
                E::Struct { b: None, a: "x" },
            ],
            none: None,
            some: Some(1.0),
            nan: f64::NAN,
            bytes: b"ab",
        };
        let (reference, canonical) = both(&s);
        assert_eq!(reference, canonical);
    }
}
