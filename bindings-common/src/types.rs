//! The two value types every record uses at the language boundary.
//!
//! - [`Timestamp`]: an instant in UTC. Serialized (MCP, JSON) as RFC 3339; a
//!   `Date` in JS, `Date` in Swift, `java.time.Instant` in Kotlin.
//! - [`JsonValue`]: any JSON value, as stored. Serialized as itself; a plain
//!   JS value in Node; JSON text (a `String`) over uniffi, which the Swift and
//!   Kotlin packages decode with their own JSON libraries.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An instant in UTC (millisecond precision or better, as the core keeps it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(transparent))]
pub struct Timestamp(pub DateTime<Utc>);

impl From<DateTime<Utc>> for Timestamp {
    fn from(t: DateTime<Utc>) -> Self {
        Timestamp(t)
    }
}

impl From<Timestamp> for DateTime<Utc> {
    fn from(t: Timestamp) -> Self {
        t.0
    }
}

impl From<std::time::SystemTime> for Timestamp {
    fn from(t: std::time::SystemTime) -> Self {
        Timestamp(t.into())
    }
}

impl From<Timestamp> for std::time::SystemTime {
    fn from(t: Timestamp) -> Self {
        t.0.into()
    }
}

/// Any JSON value (what every layer stores and returns).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(transparent))]
pub struct JsonValue(pub Value);

impl JsonValue {
    /// `null`.
    pub const NULL: JsonValue = JsonValue(Value::Null);

    /// The value as JSON text.
    pub fn to_json_string(&self) -> String {
        self.0.to_string()
    }

    /// Parse JSON text (`field` names the argument in the error).
    pub fn parse(field: &str, text: &str) -> Result<JsonValue, memstrata::Error> {
        serde_json::from_str(text)
            .map(JsonValue)
            .map_err(|e| memstrata::Error::invalid(field, format!("not valid JSON: {e}")))
    }

    /// The inner value.
    pub fn into_inner(self) -> Value {
        self.0
    }
}

impl From<Value> for JsonValue {
    fn from(v: Value) -> Self {
        JsonValue(v)
    }
}

impl From<JsonValue> for Value {
    fn from(v: JsonValue) -> Self {
        v.0
    }
}

/// A host-supplied embedding (a vector of numbers) as the bindings receive it:
/// `Float32Array | Float64Array | number[]` in Node, `List<Double>` / `[Double]`
/// over uniffi, an array of numbers in JSON. The core checks it (finite, not
/// empty, at most [`memstrata::search::MAX_EMBEDDING_DIM`] numbers, the context's dimension).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(transparent))]
pub struct Embedding(pub Vec<f64>);

impl From<Vec<f64>> for Embedding {
    fn from(v: Vec<f64>) -> Self {
        Embedding(v)
    }
}

impl From<Embedding> for Vec<f64> {
    fn from(v: Embedding) -> Self {
        v.0
    }
}

/// A score as `f64` whose decimal form is the `f32`'s shortest one (`0.3`, not
/// `0.30000001192092896`), so results read the same in every language.
pub(crate) fn score(s: f32) -> f64 {
    if s.is_finite() {
        s.to_string().parse().unwrap_or(f64::from(s))
    } else {
        0.0
    }
}

/// A count or size from the core as `i64` (a JS number, a Kotlin `Long`), saturating.
pub(crate) fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Raw key bytes handed over by the host (Python `bytes`, a Node `Buffer`, a Kotlin
/// `ByteArray` / Swift `Data` from the keychain). Its `Debug` never shows them.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct KeyBytes(pub Vec<u8>);

impl std::fmt::Debug for KeyBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyBytes(<{} bytes redacted>)", self.0.len())
    }
}

impl From<Vec<u8>> for KeyBytes {
    fn from(b: Vec<u8>) -> Self {
        KeyBytes(b)
    }
}

impl From<KeyBytes> for Vec<u8> {
    fn from(k: KeyBytes) -> Self {
        k.0
    }
}

#[cfg(feature = "uniffi")]
mod uniffi_types {
    use super::{Embedding, JsonValue, KeyBytes, Timestamp};

    uniffi::custom_type!(KeyBytes, Vec<u8>);

    uniffi::custom_type!(Timestamp, std::time::SystemTime);

    uniffi::custom_type!(Embedding, Vec<f64>);

    uniffi::custom_type!(JsonValue, String, {
        lower: |v| v.to_json_string(),
        try_lift: |s| Ok(JsonValue::parse("value", &s)?),
    });
}

#[cfg(feature = "napi")]
#[allow(unsafe_code)] // napi's conversion traits are `unsafe fn`s; these only delegate.
mod napi_types {
    use chrono::{DateTime, Utc};
    use napi::bindgen_prelude::{
        Array, Buffer, Error, Float32ArraySlice, Float64ArraySlice, FromNapiValue, Object, Result,
        Status, ToNapiValue, TypeName, Uint8Array, Unknown, ValidateNapiValue, ValueType,
    };
    use napi::{JsValue as _, sys};
    use serde_json::Value;

    use super::{Embedding, JsonValue, KeyBytes, Timestamp};

    impl TypeName for KeyBytes {
        fn type_name() -> &'static str {
            "Buffer"
        }

        fn value_type() -> ValueType {
            ValueType::Object
        }
    }

    impl ToNapiValue for KeyBytes {
        unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
            // SAFETY: forwarded unchanged to napi's own conversion for `Buffer`.
            unsafe { Buffer::to_napi_value(env, Buffer::from(val.0)) }
        }
    }

    impl FromNapiValue for KeyBytes {
        unsafe fn from_napi_value(env: sys::napi_env, v: sys::napi_value) -> Result<Self> {
            // SAFETY: forwarded to napi's own conversion; a Buffer is a Uint8Array.
            let bytes = unsafe { Uint8Array::from_napi_value(env, v) }.map_err(|_| {
                Error::new(
                    Status::InvalidArg,
                    "encryptionKey must be a Buffer or Uint8Array of 32 bytes",
                )
            })?;
            Ok(KeyBytes(bytes.to_vec()))
        }
    }

    impl ValidateNapiValue for KeyBytes {}

    // napi-derive writes this crate's TypeScript declarations into
    // $NAPI_TYPE_DEF_TMP_FOLDER only while the crate compiles. The napi CLI (and
    // bindings-node/scripts/build-dev.mjs) set NAPI_FORCE_BUILD_<CRATE> to get them
    // again; reading both variables here makes cargo recompile the crate when they change.
    const _: Option<&str> = option_env!("NAPI_FORCE_BUILD_MEMSTRATA_BINDINGS_COMMON");
    const _: Option<&str> = option_env!("NAPI_TYPE_DEF_TMP_FOLDER");

    impl TypeName for Timestamp {
        fn type_name() -> &'static str {
            "Date"
        }
        fn value_type() -> ValueType {
            ValueType::Object
        }
    }

    impl ToNapiValue for Timestamp {
        unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
            // SAFETY: forwarded unchanged to napi's own conversion for `DateTime<Utc>`.
            unsafe { DateTime::<Utc>::to_napi_value(env, val.0) }
        }
    }

    impl FromNapiValue for Timestamp {
        unsafe fn from_napi_value(env: sys::napi_env, v: sys::napi_value) -> Result<Self> {
            // SAFETY: forwarded unchanged to napi's own conversion for `DateTime<Utc>`.
            unsafe { DateTime::<Utc>::from_napi_value(env, v).map(Timestamp) }
        }
    }

    impl ValidateNapiValue for Timestamp {}

    impl TypeName for JsonValue {
        fn type_name() -> &'static str {
            "JsonValue"
        }
        fn value_type() -> ValueType {
            ValueType::Unknown
        }
    }

    impl ToNapiValue for JsonValue {
        unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
            // SAFETY: forwarded unchanged to napi's own conversion for `serde_json::Value`.
            unsafe { Value::to_napi_value(env, val.0) }
        }
    }

    impl FromNapiValue for JsonValue {
        unsafe fn from_napi_value(env: sys::napi_env, v: sys::napi_value) -> Result<Self> {
            // SAFETY: `v` is a live value of `env`, as napi guarantees for this call.
            let value = unsafe { Unknown::from_raw_unchecked(env, v) };
            let mut path = String::new();
            json_from_js(&value, &mut path, 0).map(JsonValue)
        }
    }

    /// Deepest nesting a JS value may have: far above the store's JSON depth limit
    /// (which the core reports as `LIMIT_EXCEEDED`), low enough that a cyclic value
    /// fails here instead of overflowing the stack.
    const MAX_JS_NESTING: usize = 1024;

    fn not_json(path: &str, what: &str) -> Error {
        let at = match path.char_indices().nth(80) {
            None if path.is_empty() => "the value",
            None => path,
            Some((i, _)) => &path[..i],
        };
        Error::new(Status::InvalidArg, format!("{at}: {what}"))
    }

    /// A JS value as JSON, the way `JSON.stringify` reads it except that what it would
    /// silently change is refused: BigInt, NaN/±Infinity, functions, symbols, `undefined`
    /// (other than as an object property, which is skipped), Dates, binary data, Maps and
    /// Sets (objects with no own enumerable keys that are not plain objects), cycles.
    fn json_from_js(v: &Unknown<'_>, path: &mut String, depth: usize) -> Result<Value> {
        match v.get_type()? {
            ValueType::Null => Ok(Value::Null),
            // SAFETY (every `cast` below): the value's type was just checked.
            ValueType::Boolean => Ok(Value::Bool(unsafe { v.cast::<bool>() }?)),
            ValueType::String => Ok(Value::String(unsafe { v.cast::<String>() }?)),
            ValueType::Number => {
                let n = unsafe { v.cast::<f64>() }?;
                if !n.is_finite() {
                    return Err(not_json(path, &format!("{n} is not a JSON number")));
                }
                const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
                if n.fract() == 0.0 && n.abs() <= EXACT && !(n == 0.0 && n.is_sign_negative()) {
                    Ok(Value::from(n as i64))
                } else {
                    Ok(serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number))
                }
            }
            ValueType::Undefined => Err(not_json(path, "undefined is not a JSON value (use null)")),
            ValueType::Function => Err(not_json(path, "a function is not a JSON value")),
            ValueType::Symbol => Err(not_json(path, "a symbol is not a JSON value")),
            ValueType::Object => {
                if depth >= MAX_JS_NESTING {
                    return Err(not_json(
                        path,
                        &format!(
                            "nested deeper than {MAX_JS_NESTING} levels (a cyclic structure?)"
                        ),
                    ));
                }
                if v.is_array()? {
                    let arr = unsafe { v.cast::<Array<'_>>() }?;
                    let mut out = Vec::with_capacity(arr.len() as usize);
                    for i in 0..arr.len() {
                        let len = path.len();
                        path.push_str(&format!("[{i}]"));
                        let el = arr
                            .get::<Unknown<'_>>(i)?
                            .ok_or_else(|| not_json(path, "a hole is not a JSON value"))?;
                        out.push(json_from_js(&el, path, depth + 1)?);
                        path.truncate(len);
                    }
                    return Ok(Value::Array(out));
                }
                if v.is_date()? {
                    return Err(not_json(
                        path,
                        "a Date is not a JSON value (store date.toISOString() or date.getTime())",
                    ));
                }
                if v.is_typedarray()? || v.is_arraybuffer()? || v.is_buffer()? {
                    return Err(not_json(path, "binary data is not a JSON value"));
                }
                if v.is_promise()? {
                    return Err(not_json(
                        path,
                        "a Promise is not a JSON value (await it first)",
                    ));
                }
                let obj = unsafe { v.cast::<Object<'_>>() }?;
                let mut map = serde_json::Map::new();
                for key in Object::keys(&obj)? {
                    let Some(val) = obj.get::<Unknown<'_>>(&key)? else {
                        continue;
                    };
                    if val.get_type()? == ValueType::Undefined {
                        continue;
                    }
                    let len = path.len();
                    if path.is_empty() {
                        path.push_str(&key);
                    } else {
                        path.push('.');
                        path.push_str(&key);
                    }
                    map.insert(key, json_from_js(&val, path, depth + 1)?);
                    path.truncate(len);
                }
                Ok(Value::Object(map))
            }
            // A BigInt (`ValueType::BigInt` when napi's `napi6` feature is on, else `Unknown`).
            other if matches!(other.to_string().as_str(), "BigInt" | "Unknown") => Err(not_json(
                path,
                "a BigInt is not a JSON value (convert it to a number or a string)",
            )),
            other => Err(not_json(path, &format!("a {other} is not a JSON value"))),
        }
    }

    impl ValidateNapiValue for JsonValue {}

    impl TypeName for Embedding {
        fn type_name() -> &'static str {
            "Embedding"
        }
        fn value_type() -> ValueType {
            ValueType::Object
        }
    }

    impl ToNapiValue for Embedding {
        unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
            // SAFETY: forwarded unchanged to napi's own conversion for `Vec<f64>`.
            unsafe { Vec::<f64>::to_napi_value(env, val.0) }
        }
    }

    impl FromNapiValue for Embedding {
        unsafe fn from_napi_value(env: sys::napi_env, v: sys::napi_value) -> Result<Self> {
            // SAFETY: `v` is a live value of `env`, as napi guarantees for this call.
            let value = unsafe { Unknown::from_raw_unchecked(env, v) };
            embedding_from_js(&value, "embedding").map(Embedding)
        }
    }

    impl ValidateNapiValue for Embedding {}

    /// A `Float32Array`, a `Float64Array` or an array of numbers as `f64`s (`field`
    /// names the value in errors). Finiteness and the dimension are the core's checks.
    pub fn embedding_from_js(v: &Unknown<'_>, field: &str) -> Result<Vec<f64>> {
        let expected = || {
            Error::new(
                Status::InvalidArg,
                format!("{field}: expected a Float32Array, a Float64Array or an array of numbers"),
            )
        };
        if v.get_type()? != ValueType::Object {
            return Err(expected());
        }
        if v.is_typedarray()? {
            // SAFETY (both casts): the value is a typed array; the cast checks its element type.
            if let Ok(a) = unsafe { v.cast::<Float32ArraySlice<'_>>() } {
                return Ok(a.iter().map(|x| f64::from(*x)).collect());
            }
            if let Ok(a) = unsafe { v.cast::<Float64ArraySlice<'_>>() } {
                return Ok(a.to_vec());
            }
            return Err(expected());
        }
        if !v.is_array()? {
            return Err(expected());
        }
        // SAFETY: the value is an array.
        let arr = unsafe { v.cast::<Array<'_>>() }?;
        let mut out = Vec::with_capacity(arr.len() as usize);
        for i in 0..arr.len() {
            let el = arr.get::<Unknown<'_>>(i)?;
            match el {
                Some(el) if el.get_type()? == ValueType::Number => {
                    // SAFETY: the element is a number.
                    out.push(unsafe { el.cast::<f64>() }?);
                }
                Some(el) => {
                    return Err(Error::new(
                        Status::InvalidArg,
                        format!("{field}[{i}]: expected a number, got {}", el.get_type()?),
                    ));
                }
                None => {
                    return Err(Error::new(
                        Status::InvalidArg,
                        format!("{field}[{i}]: expected a number, got a hole"),
                    ));
                }
            }
        }
        Ok(out)
    }
}

#[cfg(feature = "napi")]
pub use napi_types::embedding_from_js;

/// Convert an `f64` embedding (what JSON and most bindings carry) to `f32`,
/// refusing values that do not fit.
pub fn embedding_from_f64(field: &str, v: &[f64]) -> memstrata::Result<Vec<f32>> {
    let mut out = Vec::with_capacity(v.len());
    for (i, x) in v.iter().enumerate() {
        let f = *x as f32;
        if !f.is_finite() {
            return Err(memstrata::Error::invalid(
                field,
                format!("must hold finite numbers; element {i} is {x}"),
            ));
        }
        out.push(f);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_keep_their_short_decimal_form() {
        assert_eq!(serde_json::to_string(&score(0.3)).unwrap(), "0.3");
        assert_eq!(score(f32::NAN), 0.0);
    }

    #[test]
    fn json_text_errors_name_the_field() {
        let e = JsonValue::parse("value", "{nope").unwrap_err();
        assert!(e.to_string().contains("`value`"), "{e}");
        assert_eq!(
            JsonValue::parse("v", "[1,2]").unwrap().0,
            serde_json::json!([1, 2])
        );
    }

    #[test]
    fn timestamps_serialize_like_chrono() {
        let t = DateTime::parse_from_rfc3339("2031-06-01T10:00:00.5Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(
            serde_json::to_value(Timestamp(t)).unwrap(),
            serde_json::to_value(t).unwrap()
        );
    }
}
